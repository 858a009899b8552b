package eventstest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/gridwire/gridwire/events"
)

// Step is one event of a scripted life: its name, its routing suffix and its payload.
type Step struct {
	Name    events.Name
	Route   string
	Payload any
}

// Life is a job's whole life on cluster c, the n-th job of a test: submitted, incarnated,
// a transfer that fails once and then succeeds, queued, started, running, exited with
// n%3, staged out, and SUCCEEDED or FAILED by that code.
func Life(id, c string, n int) []Step {
	code := n % 3
	steps := []Step{
		{events.Submitted, "", events.Job{ID: id, Name: fmt.Sprintf("job-%d", n), Executable: "/bin/true",
			Submitter: fmt.Sprintf("user%d", n%2)}},
		{events.Incarnated, "", events.IncarnatedData{Cluster: c, Profile: "fork", WorkDir: "/tmp/" + id,
			Scripts: map[string]events.Script{"START": {Body: "exec ./job.sh", SHA256: "abc"}}}},
		{events.StagingIn, "", events.StagingData{Direction: "in"}},
		{events.Transfer, "", events.TransferData{Direction: "in", From: "a", To: "b", Attempt: 1, Of: 2, Error: "refused"}},
		{events.Transfer, "", events.TransferData{Direction: "in", From: "a", To: "b", Attempt: 2, Of: 2, Bytes: 5}},
		{events.Queued, c, events.QueuedData{Cluster: c}},
		{events.Started, c, events.StartedData{Cluster: c, NativeID: fmt.Sprint(1000 + n), Running: true}},
		{events.StatusChanged, c, events.StatusData{State: events.StatusRunning, NativeState: "R"}},
		{events.Exited, c, events.ExitedData{ExitCode: code}},
		{events.StagedOut, "", events.StagedOutData{OK: true}},
	}
	if code == 0 {
		return append(steps, Step{events.Succeeded, "", events.EndData{ExitCode: &code}})
	}
	return append(steps, Step{events.Failed, "", events.EndData{ExitCode: &code, Reason: "exit"}})
}

// Play appends steps to a job through the store, one second apart from at.
func Play(tb testing.TB, st *events.Store, id string, at time.Time, steps []Step) {
	tb.Helper()
	for i, s := range steps {
		e, err := events.New(id, s.Name, s.Route, at.Add(time.Duration(i)*time.Second), s.Payload)
		if err != nil {
			tb.Fatal(err)
		}
		if _, err := st.Decide(context.Background(), id, func(events.State) ([]events.Event, error) {
			return []events.Event{e}, nil
		}); err != nil {
			tb.Fatalf("job %s step %d (%s): %v", id, i, s.Name, err)
		}
	}
}

// Eventually polls cond until it holds or 20s pass. The bound only keeps a broken test
// from hanging; it asserts nothing about speed.
func Eventually(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("waited 20s for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
