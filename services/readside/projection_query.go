package readside

import (
	"slices"
	"strings"

	"github.com/gridwire/gridwire/events"
)

// matchesText reports whether the row's ID, name, submitter, reason or cluster holds
// text, in any case.
func matchesText(r *row, text string) bool {
	if containsFold(r.id, text) || containsFold(r.reason.String(), text) || containsFold(r.cluster.String(), text) {
		return true
	}
	return r.has(flagJob) && (containsFold(r.name, text) || containsFold(r.submitter.String(), text))
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
// One pass over the table, under the caller's read lock. A table has a handful of states
// and clusters among any number of rows, so the pass counts states in a short list and
// notes a cluster only when it differs from the last row's: no map is written per row
// (at a million rows those writes were most of a page's cost).
func (t *Table) summarise(q Query, p *Page) {
	groups := map[string]int{}
	for _, v := range p.Jobs {
		if v.Kind == events.KindGroup {
			groups[v.ID] = 0
		}
	}
	anyState := q
	anyState.States = nil
	var counts tally
	clusters := map[string]bool{}
	lastCluster := ""
	for _, r := range t.rows {
		if r.parent != (sym{}) && len(groups) > 0 {
			if _, ok := groups[r.parent.String()]; ok {
				groups[r.parent.String()]++
			}
		}
		if !anyState.matches(&r) {
			continue
		}
		status := r.statusOf()
		counts.add(status)
		if c := r.cluster.String(); c != "" && c != lastCluster {
			clusters[c], lastCluster = true, c
		}
		if len(q.States) == 0 || slices.Contains(q.States, status) {
			p.Total++
		}
	}
	p.Counts = make(map[events.Status]int, len(counts))
	for _, c := range counts {
		p.Counts[c.status] += c.n
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

// tally counts rows by state in a list as long as the states seen.
type tally []struct {
	status events.Status
	n      int
}

func (t *tally) add(s events.Status) {
	for i := range *t {
		if (*t)[i].status == s {
			(*t)[i].n++
			return
		}
	}
	*t = append(*t, struct {
		status events.Status
		n      int
	}{s, 1})
}
