package events_test

import (
	"testing"

	"github.com/gridwire/gridwire/events"
)

// A range's IDs are distinct, ordered, valid job IDs, listed after none for a parent
// that has a range and after its range for one that has both.
func TestIDRange(t *testing.T) {
	r := events.NewIDRange(70_000)
	ids := r.IDs()
	for i, id := range ids {
		if !events.ValidJobID(id) || i > 0 && id <= ids[i-1] {
			t.Fatalf("id %d %q after %q: not a valid ID in order", i, id, ids[max(i-1, 0)])
		}
	}
	j := events.Job{ChildRange: &r, Children: []string{"01ZZZZZZZZZZZZZZZZZZZZZZZZ"}}
	if all := j.ChildIDs(); len(all) != 70_001 || all[0] != r.First || all[70_000] != "01ZZZZZZZZZZZZZZZZZZZZZZZZ" || j.NumChildren() != 70_001 {
		t.Fatalf("child IDs %d, first %q", len(all), all[0])
	}
	if err := (events.IDRange{First: "nope", Count: 2}).Valid(); err == nil {
		t.Fatal("a range from a non-ID is valid")
	}
}
