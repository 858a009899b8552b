package executor

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/pkg/target"
)

// The gap a start lock leaves: an attempt whose START ran the job and died before the
// run was recorded leaves a lock without a status, which the next attempt takes over
// after StaleLock and would START again. With the profile's LIST DIR template the
// takeover first lists the job's control directory: the files the JOB script writes
// when it runs show the job ran, and it is not started twice (the start fails, naming
// why); without them the takeover starts it as before.
func TestTakeoverListsTheJobBeforeStartingItAgain(t *testing.T) {
	for _, ran := range []bool{true, false} {
		calls := fakeSbatch(t, "")
		wd := filepath.Join(t.TempDir(), events.NewID())
		lock := filepath.Join(wd, startLock)
		if err := os.MkdirAll(filepath.Dir(lock), 0o700); err != nil {
			t.Fatal(err)
		}
		os.WriteFile(lock, nil, 0o600)
		old := time.Now().Add(-3 * time.Minute)
		os.Chtimes(lock, old, old)
		if ran {
			os.WriteFile(filepath.Join(wd, events.StdoutFile), []byte("partial output\n"), 0o600)
		}
		inc := batchIncarnation(wd)
		inc.Scripts[events.ScriptList+":DIR"] = events.Script{Body: `ls -1A -- "${GW_PATH:-$GW_WORKDIR}"`}
		st := events.State{JobID: filepath.Base(wd), Incarnation: &inc}
		tg := &ScriptTarget{Cluster: "hpc", Shells: []Shell{target.Local{}}, Batch: true, StaleLock: time.Minute, Poll: 10 * time.Millisecond}
		for attempt := 1; attempt <= 2; attempt++ {
			run, err := tg.Start(context.Background(), st)
			switch {
			case ran && (err == nil || !strings.Contains(err.Error(), "does not start a job twice")):
				t.Errorf("attempt %d on a job that ran: %+v, %v; want a refusal naming why", attempt, run, err)
			case !ran && (err != nil || run.NativeID != "1000"):
				t.Errorf("attempt %d on a job that never ran: %+v, %v; want it started", attempt, run, err)
			}
		}
		want := 0
		if !ran {
			want = 1
		}
		if got := lines(t, calls); got != want {
			t.Errorf("ran=%v: %d submissions, want %d", ran, got, want)
		}
	}
}
