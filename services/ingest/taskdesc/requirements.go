package taskdesc

import (
	"fmt"
	"strings"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/services/ingest/internal/tree"
)

// requirements reads the requirements object into the gateway's terms: hostname is one
// host requirement any of whose globs will do, lrms a rule the target's LRMS must meet,
// and the numeric bounds keep the spec's units (megabytes, hertz), which are the
// gateway's. Every requirement records its field and position. The fork flag is read
// here and applied by lrmsDefault once the whole description is read.
func (d *decoder) requirements(v *tree.Node) events.Requirements {
	var r events.Requirements
	if !d.want(v, tree.Object, "requirements") {
		return r
	}
	for _, f := range v.Fields {
		field := "requirements." + keyName(f.Key)
		from := events.Origin{Field: field, Line: f.Value.Line, Col: f.Value.Col}
		if f.Value.Kind == tree.Null && (stringRequirement(&r, f.Key) != nil || numericRequirement(&r, f.Key) != nil ||
			f.Key == "hostname" || f.Key == "fork" || f.Key == "software" || f.Key == "lrms") {
			continue // not given
		}
		if p := stringRequirement(&r, f.Key); p != nil {
			*p, _ = d.nonEmpty(f.Value, field)
			r.SetOrigin(f.Key, from)
			continue
		}
		if p := numericRequirement(&r, f.Key); p != nil {
			if n, ok := d.int64(f.Value, field); ok {
				if n < 0 {
					d.list.Add(f.Value.Line, f.Value.Col, field, "must not be negative")
				}
				*p = n
				r.SetOrigin(f.Key, from)
			}
			continue
		}
		switch f.Key {
		case "lrms":
			if s, ok := d.nonEmpty(f.Value, field); ok {
				r.LRMS = []events.LRMSRule{{Is: s, From: from}}
			}
		case "hostname":
			if hosts := d.strList(f.Value, field); len(hosts) > 0 {
				n := events.NameRequirement{From: from}
				for _, h := range hosts {
					n.AnyOf = append(n.AnyOf, events.NamePattern{Pattern: h})
				}
				r.Hosts = []events.NameRequirement{n}
			}
		case "fork":
			if b, ok := d.boolean(f.Value, field); ok {
				d.fork, d.forkFrom = &b, from
			}
		case "software":
			if s, ok := d.str(f.Value, field); ok {
				r.Software = d.software(s, f.Value, field)
			}
		default:
			d.list.Add(f.Line, f.Col, field, "unknown field")
		}
	}
	return r
}

// lrmsDefault applies the spec's fork rule: Fork is chosen only when lrms names it or
// fork is true. A named lrms decides alone; fork: false refuses Fork; fork: true takes
// any LRMS; fork left out makes the job prefer a batch system (LRMSBatch), which lets a
// gateway with only Fork targets still run it. A v3 job always says one of these.
func (d *decoder) lrmsDefault(r *events.Requirements) {
	switch {
	case len(r.LRMS) > 0:
	case d.fork == nil:
		r.LRMSDefault = events.LRMSBatch
		r.SetOrigin("lrms_default", events.Origin{Field: "requirements.fork (not set)"})
	case !*d.fork:
		r.LRMS = []events.LRMSRule{{IsNot: events.LRMSFork, From: d.forkFrom}}
	default:
		r.LRMSDefault = events.LRMSAny
		r.SetOrigin("lrms_default", d.forkFrom)
	}
}

func stringRequirement(r *events.Requirements, key string) *string {
	switch key {
	case "queue":
		return &r.Queue
	case "os_name":
		return &r.OSName
	case "os_release":
		return &r.OSRelease
	case "os_version":
		return &r.OSVersion
	case "platform":
		return &r.Platform
	case "cpu_instruction_set":
		return &r.CPUInstructionSet
	}
	return nil
}

func numericRequirement(r *events.Requirements, key string) *int64 {
	switch key {
	case "smp_size":
		return &r.SMPSize
	case "ram_size":
		return &r.RAMSize
	case "virtual_size":
		return &r.VirtualSize
	case "cpu_hz":
		return &r.CPUHz
	}
	return nil
}

// software reads "name, name OP version, ..." (OP one of < <= == > >=).
func (d *decoder) software(s string, v *tree.Node, field string) []events.SoftwareConstraint {
	out := make([]events.SoftwareConstraint, 0, strings.Count(s, ",")+1)
	for i, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		c, ok := parseConstraint(item)
		c.From = events.Origin{Field: fmt.Sprintf("%s item %d", field, i+1), Line: v.Line, Col: v.Col}
		if !ok {
			d.list.Addf(v.Line, v.Col, field, "item %d %q is not \"name\" or \"name OP version\" with OP one of <, <=, ==, >, >=", i+1, item)
			continue
		}
		out = append(out, c)
	}
	return out
}

// parseConstraint reads "name" or "name OP version": a name and a version are runs of
// characters other than blanks, ',', '<', '>', '=' and '!'.
func parseConstraint(item string) (events.SoftwareConstraint, bool) {
	var c events.SoftwareConstraint
	n := wordEnd(item)
	if n == 0 {
		return c, false
	}
	c.Name = item[:n]
	rest := strings.TrimLeft(item[n:], " \t")
	if rest == "" {
		return c, n == len(item)
	}
	for _, op := range [...]string{"<=", ">=", "==", "<", ">"} {
		if strings.HasPrefix(rest, op) {
			c.Op = op
			break
		}
	}
	if c.Op == "" {
		return c, false
	}
	rest = strings.TrimLeft(rest[len(c.Op):], " \t")
	v := wordEnd(rest)
	if v == 0 || v != len(rest) {
		return c, false
	}
	c.Version = rest
	return c, true
}

func wordEnd(s string) int {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case ' ', '\t', '\n', '\r', '\f', '\v', ',', '<', '>', '=', '!':
			return i
		}
	}
	return len(s)
}
