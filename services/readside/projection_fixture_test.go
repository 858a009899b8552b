package readside

import (
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/gridwire/gridwire/events/eventstest"
)

// Every recorded history (events/testdata/replay) folds into the job table to exactly
// the row the live projector wrote for each job when it was recorded.
func TestReplayFixturesProjectToTheirRecordedRows(t *testing.T) {
	fs, err := eventstest.LoadFixtures(filepath.Join("..", "..", "events", filepath.FromSlash(eventstest.ReplayDir)))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fs {
		t.Run(f.Name, func(t *testing.T) {
			table := NewTable()
			for _, e := range f.Events {
				if _, err := table.Apply(e); err != nil {
					t.Fatalf("event %d (%s of job %s): %v", e.Seq, e.Name, e.JobID, err)
				}
			}
			got := map[string]Row{}
			for _, id := range f.Jobs() {
				row, ok := table.Row(id)
				if !ok {
					t.Fatalf("job %s has no row", id)
				}
				got[id] = recordedShape(row, f.Rows[id])
			}
			if diff := cmp.Diff(f.Rows, got); diff != "" {
				t.Fatalf("projected rows differ from the recorded ones (-recorded +projected):\n%s", diff)
			}
			if m := table.Meta(); m.Seq != f.Events[len(f.Events)-1].Seq || m.Jobs != len(f.Rows) {
				t.Errorf("table stamped at %d with %d jobs, want %d and %d", m.Seq, m.Jobs, f.Events[len(f.Events)-1].Seq, len(f.Rows))
			}
		})
	}
}

// recordedShape is a row as the recordings of v1 hold it: a row now also keeps its job's
// place in its document and its DDS collection (a job's view is served from its row),
// which the recordings predate; they are checked against the full fold instead
// (TestRowFoldEqualsFullFoldOnRecordedHistories). Only what a recording lacks is left out.
func recordedShape(r, recorded Row) Row {
	if r.Job == nil || recorded.Job == nil {
		return r
	}
	j := *r.Job
	if recorded.Job.Original.Path == "" {
		j.Original.Path = ""
	}
	if recorded.Job.DDS == nil {
		j.DDS = nil
	}
	r.Job = &j
	return r
}
