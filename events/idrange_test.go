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

// AppendText spells the IDs as At does, across a carry out of the low 64 bits too.
func TestIDRangeAppendText(t *testing.T) {
	for _, r := range []events.IDRange{events.NewIDRange(5000), {First: "01JDJ7Q1ZQ3S2K2B9ZZZZZZZZX", Count: 10}} {
		for _, from := range []int{0, 1, r.Count - 7} {
			text := string(r.AppendText([]byte("x"), from, 7))
			if len(text) != 1+7*26 || text[0] != 'x' {
				t.Fatalf("%q", text)
			}
			for k := range 7 {
				if got, want := text[1+26*k:1+26*(k+1)], r.At(from+k); got != want {
					t.Fatalf("ID %d from %d of %v: %s, At says %s", k, from, r, got, want)
				}
			}
		}
	}
}
