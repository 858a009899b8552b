package executor

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gridwire/gridwire/events"
)

// A running fork job holds no thread of the gateway: the reaper learns of the job's exit
// from its pidfd through the runtime's poller, where cmd.Wait would block a thread in
// waitid for each running job (ten thousand running jobs would pass Go's thread limit).
// Once a job ends it is reaped: no zombie is left.
func TestForkReaperHoldsNoThreadPerRunningJob(t *testing.T) {
	f := &ForkTarget{Cluster: "local"}
	const jobs = 40
	before := threads(t)
	var pids []int
	defer func() {
		for _, pid := range pids {
			_ = syscall.Kill(-pid, syscall.SIGKILL)
		}
	}()
	for range jobs {
		inc := newForkJob(t, "sleep 60")
		run, err := f.Start(context.Background(), events.State{JobID: filepath.Base(inc.WorkDir), Incarnation: &inc})
		if err != nil {
			t.Fatal(err)
		}
		pid, err := strconv.Atoi(run.NativeID)
		if err != nil {
			t.Fatal(err)
		}
		pids = append(pids, pid)
	}
	// Give each reaper time to reach its wait: a blocking one would hold a thread by then.
	time.Sleep(500 * time.Millisecond)
	if n := threads(t); n-before >= jobs/2 {
		t.Errorf("%d threads with %d jobs running, %d before: a thread per running job", n, jobs, before)
	}
	for _, pid := range pids {
		if err := syscall.Kill(-pid, syscall.SIGKILL); err != nil {
			t.Fatalf("killing job %d: %v", pid, err)
		}
	}
	deadline := time.Now().Add(20 * time.Second)
	for _, pid := range pids {
		for {
			_, err := os.Stat("/proc/" + strconv.Itoa(pid))
			if os.IsNotExist(err) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("job %d was not reaped: state %q", pid, procState(strconv.Itoa(pid)))
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// threads is this process's thread count.
func threads(t *testing.T) int {
	t.Helper()
	fh, err := os.Open("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	sc := bufio.NewScanner(fh)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "Threads:"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("no thread count in /proc/self/status")
	return 0
}
