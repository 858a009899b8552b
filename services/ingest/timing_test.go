package ingest

import (
	"strings"
	"testing"
	"time"

	"github.com/gridwire/gridwire/events"
)

// TestJRDLTimesWithMonths: a jobDuration with months is refused at its position (it was
// silently dropped before); a jobStartBefore with months is kept and anchored at the
// submission time, so the job script gets one absolute deadline.
func TestJRDLTimesWithMonths(t *testing.T) {
	_, err := Parse("doc.xml", []byte(`<jrdl><job><executable><path><stringElement value="x"/></path></executable>
<jobDuration>P1M</jobDuration></job></jrdl>`), ParseOptions{Format: FormatJRDL})
	if err == nil || !strings.Contains(err.Error(), "doc.xml:2:1: job[0]/jobDuration") || !strings.Contains(err.Error(), "years or months") {
		t.Errorf("jobDuration P1M: %v", err)
	}
	jobs, err := Parse("doc.xml", []byte(`<jrdl><job><executable><path><stringElement value="x"/></path></executable>
<jobStartBefore>P1M2D</jobStartBefore><jobDuration>PT90S</jobDuration></job></jrdl>`), ParseOptions{Format: FormatJRDL})
	if err != nil {
		t.Fatal(err)
	}
	j := jobs[0]
	if j.Duration != 90*time.Second {
		t.Errorf("duration %v", j.Duration)
	}
	anchorDeadline(&j, time.Date(2026, 2, 1, 10, 0, 0, 0, time.UTC))
	if want := time.Date(2026, 3, 3, 10, 0, 0, 0, time.UTC); j.StartBefore == nil || !j.StartBefore.Equal(want) {
		t.Errorf("start before %v, want %v", j.StartBefore, want)
	}
	given := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	k := events.Job{StartBefore: &given, StartWithin: &events.Period{Days: 1}}
	if anchorDeadline(&k, time.Now()); !k.StartBefore.Equal(given) {
		t.Errorf("an absolute deadline was moved to %v", k.StartBefore)
	}
}
