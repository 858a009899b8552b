package sshtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gridwire/gridwire/pkg/proctest"
)

// A job a failed test left running on its sshd (a detached script under the test's
// scratch directory and the sleep it started) is ended by the test's cleanup.
func TestCleanupEndsDetachedJobs(t *testing.T) {
	s := StartOpenSSH(t)
	script := filepath.Join(s.Dir, "job.sh")
	pidFile := filepath.Join(s.Dir, "sleep.pid")
	if err := os.WriteFile(script, []byte("sleep 300 &\necho $! > "+pidFile+"\nwait\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("ssh", append(s.SSHArgs(), "127.0.0.1",
		"nohup /bin/sh "+script+" </dev/null >/dev/null 2>&1 &")...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("ssh: %v\n%s", err, out)
	}
	var pid int
	for deadline := time.Now().Add(10 * time.Second); pid == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the job did not write its sleep's pid")
		}
		b, _ := os.ReadFile(pidFile)
		pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
	}
	if proctest.SessionOf(pid) == 0 {
		t.Fatalf("sleep %d is not running", pid)
	}
	// A process of the test's own session whose command line names the directory too:
	// the cleanup must leave it alone. (In a container the test's session leader may sit
	// outside the PID namespace, where /proc shows the session as 0.)
	// (A shell waiting on its standard input, a pipe nobody writes: it starts no child
	// that could outlive it.)
	own := exec.Command("/bin/sh", "-c", "read line", "sh", s.Dir)
	stdin, err := own.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := own.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { stdin.Close(); own.Process.Kill(); own.Wait() }()
	proctest.KillSessionsNaming(filepath.Dir(s.Dir))
	for deadline := time.Now().Add(10 * time.Second); alive(pid); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("sleep %d still runs after the cleanup", pid)
		}
	}
	if !alive(own.Process.Pid) {
		t.Fatal("the cleanup ended a process of the test's own session")
	}
}

// alive says whether pid runs and is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	fields := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return len(fields) > 0 && fields[0] != "Z"
}
