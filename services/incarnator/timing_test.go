package incarnator

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gridwire/gridwire/events"
)

// runForkJob plans job on a fork cluster, starts it with the profile's START and returns
// its exit status line once written.
func runForkJob(t *testing.T, job events.Job) (string, events.IncarnatedData) {
	t.Helper()
	p := mustPlanner(t, testSet(t, nil), forkCluster(t.TempDir()))
	inc, err := p.Plan(job)
	if err != nil {
		t.Fatal(err)
	}
	writeJob(t, inc)
	vars := map[string]string{events.VarWorkDir: inc.WorkDir, events.VarJobID: job.ID}
	if out, err := runScript(t, "/bin/sh", inc.Scripts[events.ScriptStart].Body, vars, ""); err != nil {
		t.Fatalf("START: %v: %s", err, out)
	}
	return waitFile(t, filepath.Join(inc.WorkDir, events.ExitFile)), inc
}

// TestJobDurationEndsAnOverrunningJob: a job still running after its jobDuration is ended
// by the JOB script, and its exit status line says why. Before, it ran to its end.
func TestJobDurationEndsAnOverrunningJob(t *testing.T) {
	wall := events.Period{Seconds: 1}
	got, inc := runForkJob(t, events.Job{ID: "01LONG", Executable: "/bin/sh", Arguments: []string{"-c", "sleep 600 & echo $! > sleep.pid; wait"}, Duration: time.Second, Walltime: &wall})
	if want := "143 jobDuration PT1S: still running after 1 s, so it was ended\n"; got != want {
		t.Errorf("exit status %q, want %q", got, want)
	}
	// The program's own children end with it: before, the TERM reached only the
	// subshell around the program, and its sleep ran on for ten minutes.
	b, err := os.ReadFile(filepath.Join(inc.WorkDir, "sleep.pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	for deadline := time.Now().Add(30 * time.Second); processRuns(pid); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("the overrunning job's child %d still runs after the job was ended", pid)
		}
	}
	got, inc = runForkJob(t, events.Job{ID: "01SHORT", Executable: "echo", Arguments: []string{"done"}, Duration: time.Hour})
	if got != "0\n" {
		t.Errorf("a job within its duration: exit status %q", got)
	}
	if out, _ := os.ReadFile(filepath.Join(inc.WorkDir, events.StdoutFile)); string(out) != "done\n" {
		t.Errorf("stdout %q", out)
	}
}

// TestJobStartBeforePassedNeverRuns: a job whose start deadline has passed when its JOB
// script starts does not run its program and fails with the reason.
func TestJobStartBeforePassedNeverRuns(t *testing.T) {
	deadline := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
	got, inc := runForkJob(t, events.Job{ID: "01LATE", Executable: "/bin/sh", Arguments: []string{"-c", "echo ran"}, StartBefore: &deadline})
	if want := "125 jobStartBefore: the job had not started by 2020-01-02T03:04:05Z, so it was not run\n"; got != want {
		t.Errorf("exit status %q, want %q", got, want)
	}
	if out, _ := os.ReadFile(filepath.Join(inc.WorkDir, events.StdoutFile)); len(out) != 0 {
		t.Errorf("the program ran: %q", out)
	}
	future := time.Now().Add(time.Hour)
	if got, _ := runForkJob(t, events.Job{ID: "01INTIME", Executable: "true", StartBefore: &future}); got != "0\n" {
		t.Errorf("a job started before its deadline: exit status %q", got)
	}
}

// TestJobStartTimeDelaysTheProgram: the program does not start before jobStartTime, read
// on the target's own clock. Before, it started at once.
func TestJobStartTimeDelaysTheProgram(t *testing.T) {
	start := time.Now().Add(2 * time.Second).Truncate(time.Second)
	got, inc := runForkJob(t, events.Job{ID: "01LATER", Executable: "date", Arguments: []string{"+%s"}, StartTime: &start})
	if got != "0\n" {
		t.Fatalf("exit status %q", got)
	}
	out, _ := os.ReadFile(filepath.Join(inc.WorkDir, events.StdoutFile))
	ran, err := strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64)
	if err != nil || ran < start.Unix() {
		t.Errorf("the program ran at %q, before its start time %d", out, start.Unix())
	}
}

// TestContactAndCountExclude: the requirements JRDL's resourceManagerContact and count
// become (host_names, processors) keep a job off a cluster without that host or with
// fewer processors, and the exclusion names both elements and their lines.
func TestContactAndCountExclude(t *testing.T) {
	cl := forkCluster(t.TempDir())
	cl.Info.Attributes = map[string]string{"cpus": "16"}
	p := mustPlanner(t, testSet(t, nil), cl)
	job := events.Job{ID: "01BIG", Executable: "true", Requirements: events.Requirements{
		Hosts: []events.NameRequirement{{AnyOf: []events.NamePattern{{Pattern: "eros01.gridcenter.or.kr"}},
			From: events.Origin{Field: "job[0]/resourceManagerContact", Line: 2, Col: 1}}},
		Processors: 64, Origins: map[string]events.Origin{"processors": {Field: "job[0]/resource/count", Line: 3, Col: 11}}}}
	_, err := p.Plan(job)
	var nm *NoMatchError
	if !errors.As(err, &nm) {
		t.Fatalf("plan: %v", err)
	}
	why := nm.Excluded["local"]
	for _, want := range []string{"job[0]/resourceManagerContact (line 2): none of eros01.gridcenter.or.kr is a host of this cluster",
		"job[0]/resource/count (line 3): the job needs 64 processors, the cluster has 16"} {
		if !strings.Contains(why, want) {
			t.Errorf("exclusion %q lacks %q", why, want)
		}
	}
}

// processRuns says whether pid is a live process (not gone, not a zombie).
func processRuns(pid int) bool {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	rest := string(b[strings.LastIndexByte(string(b), ')')+1:])
	return !strings.HasPrefix(strings.TrimSpace(rest), "Z")
}
