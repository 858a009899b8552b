package events_test

import (
	"errors"
	"strconv"
	"testing"

	"github.com/gridwire/gridwire/events"
)

// run is one attempt's events from incarnation to its end with the exit code.
func run(t *testing.T, id string, seq *uint64, code int) []events.Event {
	next := func(name events.Name, route string, payload any) events.Event {
		*seq++
		return ev(t, id, *seq, name, route, payload)
	}
	evs := []events.Event{
		next(events.Incarnated, "", events.IncarnatedData{Cluster: "c", WorkDir: "/w/" + id}),
		next(events.Queued, "c", events.QueuedData{Cluster: "c"}),
		next(events.Started, "c", events.StartedData{Cluster: "c", NativeID: "n" + itoa(int(*seq)), Host: "h", Running: true}),
		next(events.Exited, "c", events.ExitedData{ExitCode: code}),
		next(events.StagedOut, "", events.StagedOutData{OK: true}),
	}
	if code == 0 {
		return append(evs, next(events.Succeeded, "", events.EndData{ExitCode: &code}))
	}
	return append(evs, next(events.Failed, "", events.EndData{ExitCode: &code, Reason: "exit code " + itoa(code)}))
}

func itoa(n int) string { return strconv.Itoa(n) }

// A job with one restart that crashes twice: two attempts, each with its own start and
// end, FAILED after the last; a third run is refused, and the log is sound.
func TestRestartedAttemptsFold(t *testing.T) {
	id := events.NewID()
	var seq uint64 = 1
	log := []events.Event{ev(t, id, 1, events.Submitted, "", events.Job{ID: id, Executable: "x", Restarts: 1})}
	log = append(log, run(t, id, &seq, 3)...)
	st, err := events.Replay(log)
	if err != nil || st.Status != events.StatusFailed || !st.Restartable() {
		t.Fatalf("after the first crash: %s restartable %v (%v)", st.Status, st.Restartable(), err)
	}
	seq++
	log = append(log, ev(t, id, seq, events.Restarted, "", events.RestartedData{Attempt: 2, Of: 2, Reason: "exit code 3"}))
	if st, err = events.Replay(log); err != nil || st.Status != events.StatusSubmitted || st.Attempt() != 2 || st.NativeID != "" {
		t.Fatalf("after restarted: %s attempt %d native %q (%v), want SUBMITTED attempt 2 with no run", st.Status, st.Attempt(), st.NativeID, err)
	}
	log = append(log, run(t, id, &seq, 4)...)
	st, err = events.Replay(log)
	if err != nil || st.Status != events.StatusFailed || st.Restartable() || *st.ExitCode != 4 {
		t.Fatalf("after the second crash: %s restartable %v (%v), want FAILED for good with exit 4", st.Status, st.Restartable(), err)
	}
	if len(st.Attempts) != 1 || st.Attempts[0].Attempt != 1 || *st.Attempts[0].ExitCode != 3 ||
		st.Attempts[0].Status != events.StatusFailed || st.Attempts[0].WorkDir != "/w/"+id {
		t.Fatalf("earlier attempts %+v, want attempt 1 FAILED with exit 3", st.Attempts)
	}
	seq++
	third := ev(t, id, seq, events.Restarted, "", events.RestartedData{Attempt: 3, Of: 2})
	if _, err := events.Apply(st, third); !errors.Is(err, events.ErrIllegalTransition) {
		t.Fatalf("a restart past the budget: %v, want refused", err)
	}
	inv := events.CheckInvariants(map[string][]events.Event{id: log}, nil)
	if !inv.OK() {
		t.Fatalf("a restarted job's log breaks invariants: %v", inv.Problems)
	}
	if bad := events.CheckInvariants(map[string][]events.Event{id: append(log, third)}, nil); bad.After != 1 {
		t.Fatalf("an event after the last attempt's end: %+v, want counted", bad)
	}
}

// Only a crash restarts: a job that never ran, or that was cancelled, does not.
func TestOnlyACrashRestarts(t *testing.T) {
	id := events.NewID()
	sub := ev(t, id, 1, events.Submitted, "", events.Job{ID: id, Executable: "x", Restarts: 3})
	unplaced, err := events.Replay([]events.Event{sub, ev(t, id, 2, events.Failed, "", events.EndData{Reason: "no cluster"})})
	if err != nil || unplaced.Restartable() {
		t.Fatalf("a job that never ran is restartable (%v)", err)
	}
	var seq uint64 = 1
	log := append([]events.Event{sub}, run(t, id, &seq, 0)...)
	ok, err := events.Replay(log)
	if err != nil || ok.Restartable() {
		t.Fatalf("a job that succeeded is restartable (%v)", err)
	}
	// A parent whose child is about to run again is not done.
	v := events.GroupOf([]events.State{ok, func() events.State {
		var s uint64 = 1
		st, _ := events.Replay(append([]events.Event{sub}, run(t, id, &s, 9)...))
		return st
	}()})
	if v.Status != events.StatusRunning {
		t.Fatalf("group with a child about to restart: %s, want RUNNING", v.Status)
	}
}
