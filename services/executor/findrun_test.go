package executor

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gridwire/gridwire/events"
)

// A script target finds a run an earlier attempt recorded beside the job without
// starting anything; no lock is no run; a lock without a status is a start in progress;
// a failed START is no run (and its lock is released for a retry).
func TestScriptTargetFindsAnEarlierRun(t *testing.T) {
	tg, _ := batchTarget()
	newJob := func(start string) events.State {
		wd := filepath.Join(t.TempDir(), events.NewID())
		if err := os.MkdirAll(filepath.Join(wd, events.ControlDir), 0o700); err != nil {
			t.Fatal(err)
		}
		inc := batchIncarnation(wd)
		inc.Scripts[events.ScriptStart] = events.Script{Body: start}
		return events.State{JobID: filepath.Base(wd), Incarnation: &inc}
	}
	ctx := context.Background()

	st := newJob("echo 4242")
	if _, found, err := tg.FindRun(ctx, st); err != nil || found {
		t.Fatalf("before any start: found %v, err %v", found, err)
	}
	if exists(filepath.Join(st.Incarnation.WorkDir, startLock)) {
		t.Fatal("looking took the start lock")
	}
	run, err := tg.Start(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	got, found, err := tg.FindRun(ctx, st)
	if err != nil || !found || got.NativeID != run.NativeID || !got.Adopted {
		t.Fatalf("after a start: %+v found %v err %v; want the run %s, adopted", got, found, err, run.NativeID)
	}

	st = newJob("echo 4243")
	if err := os.WriteFile(filepath.Join(st.Incarnation.WorkDir, startLock), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := tg.FindRun(ctx, st); !errors.Is(err, errStartInProgress) {
		t.Fatalf("a lock without a status: %v, want a start in progress", err)
	}

	st = newJob("echo no >&2; exit 3")
	if _, err := tg.Start(ctx, st); err == nil {
		t.Fatal("a failing START started")
	}
	if _, found, err := tg.FindRun(ctx, st); err != nil || found {
		t.Fatalf("after a failed START: found %v, err %v", found, err)
	}
}

// The fork target's run is the PID in the native ID marker; an empty marker is a start
// in progress until it is stale.
func TestForkTargetFindsAnEarlierRun(t *testing.T) {
	ctx := context.Background()
	f := &ForkTarget{Cluster: "local", StaleLock: time.Hour}
	inc := newForkJob(t, "true")
	st := events.State{JobID: filepath.Base(inc.WorkDir), Incarnation: &inc}
	if _, found, err := f.FindRun(ctx, st); err != nil || found {
		t.Fatalf("before any start: found %v, err %v", found, err)
	}
	marker := filepath.Join(inc.WorkDir, events.StartMarker)
	if err := os.MkdirAll(filepath.Dir(marker), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(marker, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.FindRun(ctx, st); !errors.Is(err, errStartInProgress) {
		t.Fatalf("an empty marker: %v, want a start in progress", err)
	}
	old := time.Now().Add(-2 * time.Hour)
	if err := os.Chtimes(marker, old, old); err != nil {
		t.Fatal(err)
	}
	if _, found, err := f.FindRun(ctx, st); err != nil || found {
		t.Fatalf("an abandoned marker: found %v, err %v; want no run", found, err)
	}
	if err := os.WriteFile(marker, []byte("4321\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if run, found, err := f.FindRun(ctx, st); err != nil || !found || run.NativeID != "4321" || !run.Adopted {
		t.Fatalf("a marker with a PID: %+v found %v err %v", run, found, err)
	}
}

// An executor died after START ran and before its started event, and the job was then
// cancelled: the run is recorded (adopted) and aborted, not left running behind a
// CANCELLED job.
func TestCancelAfterCrashBetweenStartAndStartedAbortsTheRun(t *testing.T) {
	e := newEnv(t)
	inc := newForkJob(t, "exec sleep 60")
	id := e.queue(inc)
	crashed := &ForkTarget{Cluster: "local"}
	first, err := crashed.Start(context.Background(), e.mustState(id))
	if err != nil {
		t.Fatal(err)
	}
	waitProc(t, first.NativeID, "S", "R")
	if _, err := (ControlAPI{Store: e.store}).Request(context.Background(), id, events.CancelRequested, events.Note{}); err != nil {
		t.Fatal(err)
	}
	e.run(Config{Cluster: localCluster(), ID: "x3"}, nil)
	st := e.waitFor(id, "CANCELLED", func(s events.State) bool { return s.Status.Terminal() })
	if st.Status != events.StatusCancelled || st.NativeID != first.NativeID {
		t.Fatalf("status %s, native ID %q; want the crashed executor's run %s recorded and cancelled", st.Status, st.NativeID, first.NativeID)
	}
	names := e.names(id)
	if count(names, events.Started) != 1 || count(names, events.Cancelled) != 1 {
		t.Fatalf("history %v", names)
	}
	waitProc(t, first.NativeID, "") // gone: the abort killed it
}

// An executor killed just after it took a job's start lock leaves the lock empty. The
// redelivered job waits the lock out and starts once; it does not spend its deliveries
// on "another start is in progress" and end FAILED without ever running.
func TestAnAbandonedEmptyLockDoesNotFailTheJob(t *testing.T) {
	e := newEnv(t)
	wd := filepath.Join(t.TempDir(), events.NewID())
	if err := os.MkdirAll(filepath.Join(wd, events.ControlDir), 0o700); err != nil {
		t.Fatal(err)
	}
	runs := filepath.Join(wd, "runs")
	inc := forkIncarnation("local", wd, "echo run >>"+runs)
	// The dead executor's lock: created, never filled.
	if err := os.WriteFile(filepath.Join(wd, events.StartMarker), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	tg := &ForkTarget{Cluster: "local", StaleLock: 1500 * time.Millisecond}
	e.run(Config{Cluster: localCluster(), ID: "x1", MaxDeliver: 2}, tg)
	id := e.queue(inc)
	st := e.waitFor(id, "started or ended", func(s events.State) bool { return s.NativeID != "" || s.Status.Terminal() })
	if st.Status == events.StatusFailed || st.NativeID == "" {
		t.Fatalf("job %s after an abandoned lock: %s (%s); want it started", id, st.Status, st.Reason)
	}
	waitFile(t, filepath.Join(wd, events.ExitFile))
	if got := waitFile(t, runs); got != "run\n" {
		t.Errorf("the job ran %d times, want once", strings.Count(got, "run"))
	}
}
