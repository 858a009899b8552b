package readside

import (
	"fmt"
	"testing"

	"github.com/gridwire/gridwire/events"
)

// tableOf is a job table of n rows: every tenth a group whose next nine jobs are its
// children, states spread over three, two clusters.
func tableOf(n int) *Table {
	t := NewTable()
	group := ""
	states := []events.Status{events.StatusRunning, events.StatusSucceeded, events.StatusFailed}
	for i := range n {
		id := fmt.Sprintf("01M8%022d", i)
		j := &events.Job{ID: id, Name: fmt.Sprintf("job-%d", i), Submitter: "u"}
		if i%10 == 0 {
			j.Kind, group = events.KindGroup, id
		} else {
			j.Parent = group
		}
		t.Set(Row{JobID: id, Status: states[i%3], Cluster: fmt.Sprintf("c%d", i%2), Job: j, LastSeq: uint64(i + 1)})
	}
	return t
}

// BenchmarkSelect is one page of the web page's list (roots, newest first, 50) with its
// counts by state, clusters and group sizes, beside Rows (a copy of every row) as the
// yardstick of one pass over the table.
func BenchmarkSelect(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		t := tableOf(n)
		b.Run(fmt.Sprintf("page/rows=%d", n), func(b *testing.B) {
			for b.Loop() {
				if p := t.Select(Query{Roots: true, Descending: true, Limit: 50}); len(p.Jobs) != 50 {
					b.Fatal(len(p.Jobs))
				}
			}
		})
		b.Run(fmt.Sprintf("search/rows=%d", n), func(b *testing.B) {
			for b.Loop() {
				t.Select(Query{Text: "job-99", Descending: true, Limit: 50})
			}
		})
		b.Run(fmt.Sprintf("yardstick-rows/rows=%d", n), func(b *testing.B) {
			for b.Loop() {
				if len(t.Rows()) != n {
					b.Fatal()
				}
			}
		})
	}
}
