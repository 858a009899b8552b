package readside

import (
	"slices"
	"strings"

	"github.com/gridwire/gridwire/events"
)

// matchesText reports whether the row's ID, name, submitter, reason or cluster holds
// text, in any case.
func matchesText(r row, text string) bool {
	if containsFold(r.st.JobID, text) || containsFold(r.st.Reason, text) || containsFold(r.st.Cluster, text) {
		return true
	}
	return r.hasJob && (containsFold(r.job.name, text) || containsFold(r.job.submitter, text))
}

// containsFold is strings.Contains under Unicode case folding, without copying s (a
// search runs it over every row of the table).
func containsFold(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if strings.EqualFold(s[i:i+len(sub)], sub) {
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
		if r.hasJob && r.job.parent != "" {
			if _, ok := groups[r.job.parent]; ok {
				groups[r.job.parent]++
			}
		}
		if !anyState.matches(r) {
			continue
		}
		p.Counts[r.st.Status]++
		if r.st.Cluster != "" {
			clusters[r.st.Cluster] = true
		}
		if len(q.States) == 0 || slices.Contains(q.States, r.st.Status) {
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
