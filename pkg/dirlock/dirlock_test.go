package dirlock_test

import (
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/gridwire/gridwire/pkg/dirlock"
)

// A second holder is refused with the first one's PID; after Release it may lock.
func TestSecondHolderIsRefused(t *testing.T) {
	dir := t.TempDir()
	l, err := dirlock.Acquire(dir)
	if err != nil {
		t.Fatal(err)
	}
	_, err = dirlock.Acquire(dir)
	if !errors.Is(err, dirlock.ErrLocked) || !strings.Contains(err.Error(), strconv.Itoa(os.Getpid())) {
		t.Fatalf("second lock: %v; want ErrLocked naming pid %d", err, os.Getpid())
	}
	l.Release()
	l.Release()
	l2, err := dirlock.Acquire(dir)
	if err != nil {
		t.Fatalf("after release: %v", err)
	}
	l2.Release()
}

// The lock holds against another process too (flock, not an in-process mutex), and a
// holder that dies frees it.
func TestLockHoldsAcrossProcesses(t *testing.T) {
	dir := t.TempDir()
	l, err := dirlock.Acquire(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := exec.Command("flock", "-n", dir+"/"+dirlock.FileName, "true").Run(); err == nil {
		t.Fatal("another process took the lock while it was held")
	}
	l.Release()
	if err := exec.Command("flock", "-n", dir+"/"+dirlock.FileName, "true").Run(); err != nil {
		t.Fatalf("after release another process could not lock: %v", err)
	}
}
