package watcher

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/events/eventstest"
	"github.com/gridwire/gridwire/pkg/bus"
)

var t0 = time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)

// openBus starts an embedded JetStream server with a file store and the JOBS stream.
func openBus(tb testing.TB) (*bus.Bus, *events.Store) { return eventstest.Open(tb, "test/watcher") }

// step is one event of a scripted life.
type step struct {
	name    events.Name
	route   string
	payload any
}

// life is a job's whole successful life on cluster c, the n-th job at time t.
func life(id, c string, n int) []step {
	code := n % 3
	steps := []step{
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
		return append(steps, step{events.Succeeded, "", events.EndData{ExitCode: &code}})
	}
	return append(steps, step{events.Failed, "", events.EndData{ExitCode: &code, Reason: "exit"}})
}

// play appends steps to a job through the store, one second apart from at.
func play(tb testing.TB, st *events.Store, id string, at time.Time, steps []step) {
	tb.Helper()
	for i, s := range steps {
		e, err := events.New(id, s.name, s.route, at.Add(time.Duration(i)*time.Second), s.payload)
		if err != nil {
			tb.Fatal(err)
		}
		if _, err := st.Decide(context.Background(), id, func(events.State) ([]events.Event, error) {
			return []events.Event{e}, nil
		}); err != nil {
			tb.Fatalf("job %s step %d (%s): %v", id, i, s.name, err)
		}
	}
}

// eventually polls cond until it holds or 20s pass.
func eventually(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("waited 20s for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func nopLog() *slog.Logger { return slog.New(slog.DiscardHandler) }
