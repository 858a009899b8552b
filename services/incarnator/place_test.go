package incarnator

import (
	"strings"
	"testing"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/pkg/cluster"
)

// A cluster of three hosts: a host name requirement chooses the host, a collection's
// tasks share one, and maxinstances deals units to hosts in order until none is left.
func TestPlaceHostWithinACluster(t *testing.T) {
	three := cluster.Cluster{Name: "farm", Kind: cluster.KindSSH, Hosts: []string{"wn1.example.org:2201", "wn2.example.org", "gpu3.example.org"},
		Profile: "fork", LRMS: "Fork", WorkRoot: "/w"}
	p := mustPlanner(t, testSet(t, nil), three)
	job := func(id string, r events.Requirements) events.Job {
		return events.Job{ID: id, Parent: "01PARENT0000000000000000000", Executable: "/bin/true", Requirements: r}
	}
	host := func(j events.Job) string {
		t.Helper()
		inc, err := p.Plan(j)
		if err != nil {
			t.Fatalf("job %s: %v", j.ID, err)
		}
		return inc.Host
	}
	gpu := []events.NameRequirement{{AnyOf: []events.NamePattern{{Pattern: "gpu.*", Syntax: events.SyntaxRegexp}}}}
	if h := host(job("01A0000000000000000000000A", events.Requirements{Hosts: gpu})); h != "gpu3.example.org" {
		t.Errorf("hostname gpu.* placed on %q, want gpu3.example.org", h)
	}
	if h := host(job("01A0000000000000000000000B", events.Requirements{})); h != "" {
		t.Errorf("a job asking nothing of hosts got host %q; the executor chooses", h)
	}
	// Every task of one collection instance on one host, whatever its own ID.
	seen := map[string]bool{}
	for _, id := range []string{"01A0000000000000000000000C", "01A0000000000000000000000D", "01A0000000000000000000000E", "01A0000000000000000000000F"} {
		seen[host(job(id, events.Requirements{Placement: &events.HostPlacement{Together: "main/coll_0", Spread: "coll"}}))] = true
	}
	if len(seen) != 1 || seen[""] {
		t.Errorf("one collection instance placed on %v, want one host", seen)
	}
	// At most 2 units to a host: 0,1 on the first, 2,3 on the second, 4,5 on the third.
	for i, want := range []string{"wn1.example.org:2201", "wn1.example.org:2201", "wn2.example.org", "wn2.example.org", "gpu3.example.org", "gpu3.example.org"} {
		r := events.Requirements{Placement: &events.HostPlacement{Spread: "task", Index: i, MaxPerHost: 2,
			From: events.Origin{Field: "topology/declrequirement[m]", Line: 3, Col: 1}}}
		if h := host(job("01A000000000000000000000G"+string(rune('0'+i)), r)); h != want {
			t.Errorf("unit %d placed on %q, want %q", i, h, want)
		}
	}
	over := job("01A0000000000000000000000H", events.Requirements{Placement: &events.HostPlacement{Spread: "task", Index: 6, MaxPerHost: 2,
		From: events.Origin{Field: "topology/declrequirement[m]", Line: 3, Col: 1}}})
	if _, err := p.Plan(over); err == nil || !strings.Contains(err.Error(), "topology/declrequirement[m] (line 3)") ||
		!strings.Contains(err.Error(), "at most 2 to a host on the 3") {
		t.Errorf("a seventh unit at 2 per host on 3 hosts: %v, want refused naming the requirement", err)
	}
	// Two host requirements each met by some host, but by no one host.
	wn := []events.NameRequirement{{AnyOf: []events.NamePattern{{Pattern: "wn.*", Syntax: events.SyntaxRegexp}}}}
	if _, err := p.Plan(job("01A0000000000000000000000J", events.Requirements{Hosts: append(gpu, wn...)})); err == nil ||
		!strings.Contains(err.Error(), "no one host of this cluster meets every host requirement") {
		t.Errorf("gpu.* and wn.* at once: %v, want refused", err)
	}
}
