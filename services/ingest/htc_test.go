package ingest

import (
	"os"
	"strings"
	"testing"
)

// TestJRDLHTCInstances: an htc job's count is how many independent instances run; the
// spec's Figure 5 (count 2, one subjob running b.out) runs b.out and the job's own a.out,
// each on one processor, neither co-allocated. Before, only b.out ran.
func TestJRDLHTCInstances(t *testing.T) {
	doc, err := os.ReadFile("testdata/jrdl/spec_figure5.xml")
	if err != nil {
		t.Fatal(err)
	}
	jobs, err := Parse("figure5.xml", doc, ParseOptions{Format: FormatJRDL})
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 3 || jobs[0].Kind != "group" {
		t.Fatalf("%d jobs, want the parent and two instances", len(jobs))
	}
	for i, want := range []string{"b.out", "a.out"} {
		j := jobs[i+1]
		if j.Executable != want || j.Count != 1 || j.Requirements.Processors != 0 || j.Coallocated() {
			t.Errorf("instance %d: executable %q count %d processors %d coallocation %+v", i, j.Executable, j.Count, j.Requirements.Processors, j.Coallocation)
		}
	}
	htc := func(count, subs string) string {
		return `<jrdl><job><executable><path><stringElement value="x"/></path></executable>
<jobType><enumeration><enumerationValue><htc/></enumerationValue></enumeration></jobType>` + count + subs + `</job></jrdl>`
	}
	jobs, err = Parse("doc", []byte(htc(`<count><integer value="3"/></count>`, "")), ParseOptions{Format: FormatJRDL})
	if err != nil || len(jobs) != 4 {
		t.Errorf("htc count 3 without subjobs: %d jobs, %v", len(jobs), err)
	}
	_, err = Parse("doc", []byte(htc(`<count><integer value="1"/></count>`, "<subjob/><subjob/>")), ParseOptions{Format: FormatJRDL})
	if err == nil || !strings.Contains(err.Error(), "doc:2:") || !strings.Contains(err.Error(), "1 is fewer than its 2 subjobs") {
		t.Errorf("fewer instances than subjobs: %v", err)
	}
	_, err = Parse("doc", []byte(htc(`<count><integer value="100000"/></count>`, "")), ParseOptions{Format: FormatJRDL})
	if err == nil || !strings.Contains(err.Error(), "over the limit") {
		t.Errorf("100000 instances: %v", err)
	}
}
