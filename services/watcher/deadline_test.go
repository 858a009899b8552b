package watcher

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gridwire/gridwire/events"
)

// A job still pending in its batch queue after its start-before deadline is asked,
// once, to be cancelled there, the request marked so the ABORT ends it FAILED with the
// reason; a job with a deadline still ahead is left queued.
func TestQueuedPastItsStartDeadlineIsCancelledInTheQueue(t *testing.T) {
	b, st := openBus(t)
	p := &flakyProber{}
	p.obs.Store(Observation{State: events.StatusQueued, NativeState: "PENDING"})
	defer runWatcher(t, b, st, p)()
	pending := func(id string, deadline time.Time) {
		steps := life(id, "hpc1", 0)[:7]
		steps[0].Payload = events.Job{ID: id, Executable: "/bin/true", StartBefore: &deadline}
		steps[6].Payload = events.StartedData{Cluster: "hpc1", NativeID: "1000", Running: false}
		play(t, st, id, t0, steps)
	}
	late, early := events.NewID(), events.NewID()
	deadline := time.Now().Add(-time.Minute).UTC().Truncate(time.Second)
	pending(late, deadline)
	pending(early, time.Now().Add(time.Hour))
	eventually(t, "the cancel request", func() bool { return count(names(t, st, late), events.CancelRequested) == 1 })
	polls := p.calls.Load()
	eventually(t, "ten more polls", func() bool { return p.calls.Load() >= polls+10 })
	var n events.Note
	asked := 0
	for _, e := range eventsOf(t, st, late) {
		if e.Name == events.CancelRequested {
			asked++
			if err := e.Payload(&n); err != nil {
				t.Fatal(err)
			}
		}
	}
	if asked != 1 || n.Action != events.CancelStartDeadline || !strings.Contains(n.Reason, "had not started by "+deadline.Format(time.RFC3339)) ||
		!strings.Contains(n.Reason, "hpc1's queue") {
		t.Errorf("%d requests, last %+v; want one start-deadline request naming the deadline and the queue", asked, n)
	}
	if c := count(names(t, st, early), events.CancelRequested); c != 0 {
		t.Errorf("a job whose deadline is ahead was asked to cancel %d times", c)
	}
}

func eventsOf(t *testing.T, st *events.Store, id string) []events.Event {
	t.Helper()
	h, err := st.Load(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return h.Events
}
