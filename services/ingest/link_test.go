package ingest

import (
	"slices"
	"testing"

	"github.com/gridwire/gridwire/events"
)

// A group's children get IDs in the order the description wrote them (whatever lists them
// by ID lists them so), each child's parent is the group, and a small group lists its
// children by ID rather than as a range.
func TestLinkNumbersAGroupsChildrenInOrder(t *testing.T) {
	for round := 0; round < 50; round++ { // random IDs of one millisecond sort in order 1 in 120
		jobs := []events.Job{{Kind: events.KindGroup}, {}, {}, {}, {}, {}}
		Link(jobs, "alice")
		ids := make([]string, 0, len(jobs)-1)
		for _, j := range jobs[1:] {
			if j.Parent != jobs[0].ID || j.Submitter != "alice" {
				t.Fatalf("child %+v: parent %q, want %q", j, j.Parent, jobs[0].ID)
			}
			ids = append(ids, j.ID)
		}
		if !slices.IsSorted(ids) || len(slices.Compact(slices.Clone(ids))) != len(ids) {
			t.Fatalf("round %d: children %v, want distinct IDs in the description's order", round, ids)
		}
		if jobs[0].ChildRange != nil || !slices.Equal(jobs[0].Children, ids) {
			t.Fatalf("parent lists %v (range %+v), want the children by ID", jobs[0].Children, jobs[0].ChildRange)
		}
	}
	lone := []events.Job{{}}
	Link(lone, "bob")
	if lone[0].ID == "" || lone[0].Parent != "" {
		t.Fatalf("a lone job %+v", lone[0])
	}
}
