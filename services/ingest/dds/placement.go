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
// one host, which is no part of choosing a target. The types DDS checks by other means
// (groupname, custom, and a requirement with no type) are kept as unsupported, so a
// task never runs where one would be ignored.
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
		case "maxinstances":
		default:
			r.Unsupported = append(r.Unsupported, events.UnsupportedRequirement{
				What: fmt.Sprintf("requirement type %q is not supported here", q.Type), From: from})
		}
	}
	return r
}
