package events_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/gridwire/gridwire/events"
)

// randomHistories makes n histories from the recorded ones, each a recorded job's events
// shuffled about: events dropped, repeated, swapped with the next, and events of other
// jobs (of every kind: groups, sessions, restarts) moved onto the job, so most of what a
// fold can refuse is in them. The same seed gives the same histories.
func randomHistories(t *testing.T, seed uint64, n int) [][]events.Event {
	t.Helper()
	var lives [][]events.Event
	var pool []events.Event
	for _, f := range loadFixtures(t) {
		for _, id := range f.Jobs() {
			lives = append(lives, f.History(id))
		}
		pool = append(pool, f.Events...)
	}
	r := rand.New(rand.NewPCG(seed, 14))
	out := make([][]events.Event, 0, n)
	for range n {
		life := lives[r.IntN(len(lives))]
		var h []events.Event
		for _, e := range life {
			switch r.IntN(12) {
			case 0: // dropped
			case 1:
				h = append(h, e, e)
			case 2:
				other := pool[r.IntN(len(pool))]
				other.JobID = e.JobID
				h = append(h, other, e)
			default:
				h = append(h, e)
			}
			if k := len(h); k >= 2 && r.IntN(10) == 0 {
				h[k-1], h[k-2] = h[k-2], h[k-1]
			}
		}
		out = append(out, h)
	}
	return out
}

// snapshot is everything a state holds, pointed-to values included.
func snapshot(t *testing.T, st events.State) string {
	t.Helper()
	b, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Folding in place (State.Fold, what a replay folds with) gives at every event what
// Apply gives: the same state and the same refusal, over every recorded history and over
// random ones made of recorded events, where most events are refused. A refused event
// leaves the state exactly as it was, and neither changes what the state it started from
// points to.
func TestFoldInPlaceMatchesApply(t *testing.T) {
	histories := randomHistories(t, 1, 3000)
	for _, f := range loadFixtures(t) {
		for _, id := range f.Jobs() {
			histories = append(histories, f.History(id))
		}
	}
	refused, folded := 0, 0
	for _, h := range histories {
		var st events.State
		for i, e := range h {
			before := snapshot(t, st)
			want, wantErr := events.Apply(st, e)
			got := st
			gotErr := got.Fold(&e)
			if fmt.Sprint(gotErr) != fmt.Sprint(wantErr) {
				t.Fatalf("job %s event %d (%s): Fold refuses with %v, Apply with %v", e.JobID, i, e.Name, gotErr, wantErr)
			}
			if snapshot(t, st) != before {
				t.Fatalf("job %s event %d (%s): the state folded from changed", e.JobID, i, e.Name)
			}
			if gotErr != nil {
				if snapshot(t, got) != before || !cmp.Equal(got, st) {
					t.Fatalf("job %s event %d (%s) refused (%v), but the state changed:\n%s", e.JobID, i, e.Name, gotErr, cmp.Diff(st, got))
				}
				refused++
				continue
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Fatalf("job %s event %d (%s): Fold differs from Apply (-Apply +Fold):\n%s", e.JobID, i, e.Name, diff)
			}
			st = got
			folded++
		}
	}
	if refused < 1000 || folded < 10000 {
		t.Errorf("%d events refused, %d folded: the histories do not try the refusals", refused, folded)
	}
}
