package events_test

import (
	"testing"
	"time"

	"github.com/gridwire/gridwire/events"
)

func history(t *testing.T, id string, names ...events.Name) []events.Event {
	t.Helper()
	var out []events.Event
	for i, n := range names {
		var payload any
		switch n {
		case events.Submitted:
			payload = events.Job{ID: id, Executable: "/bin/true"}
		case events.Incarnated:
			payload = events.IncarnatedData{Cluster: "local"}
		case events.Queued:
			payload = events.QueuedData{Cluster: "local"}
		case events.Started:
			payload = events.StartedData{Cluster: "local", NativeID: "1"}
		case events.Succeeded, events.Failed, events.Cancelled:
			payload = events.EndData{}
		}
		e, err := events.New(id, n, "", time.Unix(int64(i), 0), payload)
		if err != nil {
			t.Fatal(err)
		}
		e.Seq = uint64(i + 1)
		out = append(out, e)
	}
	return out
}

// Each rule is broken by exactly the history built to break it, and a sound log passes.
func TestCheckInvariants(t *testing.T) {
	ok := events.NewID()
	sound := map[string][]events.Event{ok: history(t, ok, events.Submitted, events.Cancelled)}
	if r := events.CheckInvariants(sound, []string{ok}); !r.OK() || r.Jobs != 1 || r.Events != 2 {
		t.Fatalf("a sound log: %+v", r)
	}
	stuck, illegal, twice := events.NewID(), events.NewID(), events.NewID()
	lost, extra := events.NewID(), events.NewID()
	log := map[string][]events.Event{
		ok:      sound[ok],
		stuck:   history(t, stuck, events.Submitted),
		illegal: history(t, illegal, events.Submitted, events.Started),
		twice:   history(t, twice, events.Submitted, events.Cancelled, events.Cancelled),
		extra:   history(t, extra, events.Submitted, events.Cancelled),
	}
	r := events.CheckInvariants(log, []string{ok, stuck, illegal, twice, lost})
	// The illegal history never ended either: it is stuck as well.
	want := events.Invariants{Jobs: 5, Lost: 1, Duplicated: 1, Stuck: 2, Illegal: 1}
	if r.Lost != want.Lost || r.Duplicated != want.Duplicated || r.Stuck != want.Stuck || r.Illegal != want.Illegal ||
		r.Terminals+r.After != 1 || r.OK() {
		t.Fatalf("report %+v; want lost 1, duplicated 1, stuck 2, illegal 1, one job with two terminals\n%v", r, r.Problems)
	}
}
