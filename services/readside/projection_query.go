package readside

import (
	"slices"
	"strings"

	"github.com/gridwire/gridwire/events"
)

// matchesText reports whether the row's ID, name, submitter, reason, cluster or place in
// its document holds text, in any case.
func matchesText(r Row, text string) bool {
	text = strings.ToLower(text)
	fields := []string{r.JobID, r.Reason, r.Cluster}
	if r.Job != nil {
		fields = append(fields, r.Job.Name, r.Job.Submitter, r.Job.Original.Path)
	}
	for _, f := range fields {
		if strings.Contains(strings.ToLower(f), text) {
			return true
		}
	}
	return false
}

// summarise fills in what a page says of the whole query: its total, the counts by state
// (the state filter left out), the clusters, and how many jobs each group on the page has.
// One pass over the table, under the caller's read lock.
func (t *Table) summarise(q Query, p *Page) {
	groups := map[string]int{}
	for _, v := range p.Jobs {
		if v.Kind == events.KindGroup {
			groups[v.ID] = 0
		}
	}
	anyState := q
	anyState.States = nil
	p.Counts = map[events.Status]int{}
	clusters := map[string]bool{}
	for _, r := range t.rows {
		if r.Job != nil && r.Job.Parent != "" {
			if _, ok := groups[r.Job.Parent]; ok {
				groups[r.Job.Parent]++
			}
		}
		if !anyState.matches(r) {
			continue
		}
		p.Counts[r.Status]++
		if r.Cluster != "" {
			clusters[r.Cluster] = true
		}
		if len(q.States) == 0 || slices.Contains(q.States, r.Status) {
			p.Total++
		}
	}
	for c := range clusters {
		p.Clusters = append(p.Clusters, c)
	}
	slices.Sort(p.Clusters)
	for i, v := range p.Jobs {
		if n, ok := groups[v.ID]; ok {
			p.Jobs[i].Children = n
		}
	}
}
