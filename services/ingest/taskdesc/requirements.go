package taskdesc

import (
	"regexp"
	"strings"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/services/ingest/internal/tree"
)

func (d *decoder) requirements(v *tree.Node) events.Requirements {
	var r events.Requirements
	if !d.want(v, tree.Object, "requirements") {
		return r
	}
	strs := map[string]*string{"lrms": &r.LRMS, "queue": &r.Queue, "os_name": &r.OSName,
		"os_release": &r.OSRelease, "os_version": &r.OSVersion, "platform": &r.Platform,
		"cpu_instruction_set": &r.CPUInstructionSet}
	nums := map[string]*int64{"smp_size": &r.SMPSize, "ram_size": &r.RAMSize,
		"virtual_size": &r.VirtualSize, "cpu_hz": &r.CPUHz}
	for _, f := range v.Fields {
		field := "requirements." + keyName(f.Key)
		if p, ok := strs[f.Key]; ok {
			*p, _ = d.nonEmpty(f.Value, field)
			continue
		}
		if p, ok := nums[f.Key]; ok {
			if n, ok := d.int64(f.Value, field); ok {
				if n < 0 {
					d.list.Add(f.Value.Line, f.Value.Col, field, "must not be negative")
				}
				*p = n
			}
			continue
		}
		switch f.Key {
		case "hostname":
			r.Hosts = d.strList(f.Value, field)
		case "fork":
			if b, ok := d.boolean(f.Value, field); ok {
				r.Fork = &b
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

var constraint = regexp.MustCompile(`^([^\s<>=!,]+)(?:\s*(<=|>=|==|<|>)\s*([^\s<>=!,]+))?$`)

// software reads "name, name OP version, ..." (OP one of < <= == > >=).
func (d *decoder) software(s string, v *tree.Node, field string) []events.SoftwareConstraint {
	var out []events.SoftwareConstraint
	for i, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		m := constraint.FindStringSubmatch(item)
		if m == nil {
			d.list.Addf(v.Line, v.Col, field, "item %d %q is not \"name\" or \"name OP version\" with OP one of <, <=, ==, >, >=", i+1, item)
			continue
		}
		out = append(out, events.SoftwareConstraint{Name: m[1], Op: m[2], Version: m[3]})
	}
	return out
}
