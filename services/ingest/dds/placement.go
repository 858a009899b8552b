package dds

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/gridwire/gridwire/events"
)

// placement turns a task's or collection's requirements into the gateway's terms:
// hostname asks for a host and wnname for the target itself (DDS's worker-node name is
// the cluster's name here), each a regular expression for the whole name or the name
// itself; gpu bounds the target's "gpus" attribute. maxinstances limits how many run on
// one host (events.HostPlacement). custom is accepted and not checked, as DDS's
// scheduler does; groupname names a group of DDS agents, which gridwire does not
// start, and is kept as unsupported with that reason, so a task never runs where it
// would be ignored.
//
// DDS's own example writes "+.gsi.de" for "anything ending in .gsi.de": a pattern that
// starts with a bare '+' is read as ".+...".
func (t *topology) placement(reqs []events.DDSRequirement) events.Requirements {
	var r events.Requirements
	for _, q := range reqs {
		from := t.reqFrom[q.Name]
		switch q.Type {
		case "hostname", "wnname":
			v := q.Value
			if strings.HasPrefix(v, "+") {
				v = "." + v
			}
			n := events.NameRequirement{AnyOf: []events.NamePattern{{Pattern: v, Syntax: events.SyntaxRegexp}}, From: from}
			if q.Type == "hostname" {
				r.Hosts = append(r.Hosts, n)
			} else {
				r.Targets = append(r.Targets, n)
			}
		case "gpu":
			n, _ := strconv.ParseFloat(q.Value, 64) // checked when declared
			r.Attributes = append(r.Attributes, events.AttributeRequirement{Name: "gpus", AtLeast: &n, From: from})
		case "maxinstances": // per host: HostPlacement (maxPerHost)
		case "custom":
			// DDS's scheduler accepts every custom requirement without looking at it
			// (CScheduler::checkRequirements), and so does this.
		case "groupname":
			r.Unsupported = append(r.Unsupported, events.UnsupportedRequirement{
				What: fmt.Sprintf("requirement type groupname (%q) names a group of DDS agents (dds-submit --group-name); gridwire starts no agents", q.Value), From: from})
		default:
			r.Unsupported = append(r.Unsupported, events.UnsupportedRequirement{
				What: fmt.Sprintf("requirement type %q is not supported here", q.Type), From: from})
		}
	}
	return r
}

// maxPerHost is the smallest maxinstances value among the requirements (DDS checks each,
// so the smallest decides), with where it was declared; 0 when there is none.
func (t *topology) maxPerHost(reqs []events.DDSRequirement) (int, events.Origin) {
	n, from := 0, events.Origin{}
	for _, q := range reqs {
		if q.Type != "maxinstances" {
			continue
		}
		v, _ := strconv.Atoi(q.Value) // checked when declared
		if n == 0 || v < n {
			n, from = v, t.reqFrom[q.Name]
		}
	}
	return n, from
}
