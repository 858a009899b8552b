package jrdl

import (
	"net/url"
	"path"
	"strings"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/services/ingest/internal/xmltree"
)

// resource reads the resource attributes (user preferences for selection) into the
// gateway's terms: clockSpeed in MHz becomes cpu_hz in hertz, minRAMSize (MB) ram_size,
// the availability attributes lower bounds on the target's system info attributes by
// their gateway names (ram_available, storage_available, availability_1min, ...), and
// schedulingType a rule on the target's LRMS (fork: Fork; scheduler: anything else).
func (d *decoder) resource(el *xmltree.Element, job *events.Job, sc *scope) {
	d.plainAttrs(el, sc.path)
	d.noText(el, sc.path)
	r := &job.Requirements
	for _, c := range el.Children {
		path := sc.path + "/" + c.Name
		switch c.Name {
		case "count":
			if n, ok := d.integer(c, path); ok {
				job.Count = int(n)
				sc.counts.resource, sc.counts.haveRes = n, true
				sc.counts.line, sc.counts.col = c.Line, c.Col
				r.Processors = n
				r.SetOrigin("processors", origin(c, path))
			}
		case "operatingSystem":
			if name, ok := d.only(c, path, "name"); ok {
				if s, ok := d.only(name, path+"/name", "string"); ok {
					r.OSName, _ = d.nonEmptyScalar(s, sc.sub(c.Name+"/name/string"), "stringElement")
					r.SetOrigin("os_name", origin(c, path))
				}
			}
		case "processor":
			if speed, ok := d.only(c, path, "clockSpeed"); ok {
				if mhz, ok := d.integer(speed, path+"/clockSpeed"); ok {
					r.CPUHz = mhz * 1_000_000
					r.SetOrigin("cpu_hz", origin(speed, path+"/clockSpeed"))
				}
			}
		case "minMainMemory":
			d.resourceGroup(c, path, job, map[string]string{"minRAMAvailable": "ram_available", "minRAMSize": ""})
		case "minStorage":
			d.resourceGroup(c, path, job, map[string]string{"minStorageAvailable": "storage_available"})
		case "processorLoad":
			d.resourceGroup(c, path, job, map[string]string{"last15Min": "availability_15min", "last5Min": "availability_5min", "last1Min": "availability_1min"})
		case "minFreeCPU":
			if n, ok := d.integer(c, path); ok {
				atLeast(r, "free_cpu", n, origin(c, path))
			}
		case "schedulingType", "schedulingPlugin":
			d.resourceString(c, job, sc.sub(c.Name))
		default:
			d.unknown(c, sc.path)
		}
	}
}

// resourceGroup reads a container of integer attributes; keys maps each allowed child
// to the system info attribute it bounds ("" for minRAMSize, which is ram_size).
func (d *decoder) resourceGroup(el *xmltree.Element, path string, job *events.Job, keys map[string]string) {
	d.plainAttrs(el, path)
	d.noText(el, path)
	if len(el.Children) == 0 {
		d.list.Add(el.Line, el.Col, path, "is empty")
	}
	for _, c := range el.Children {
		key, ok := keys[c.Name]
		if !ok {
			d.unknown(c, path)
			continue
		}
		n, ok := d.integer(c, path+"/"+c.Name)
		if !ok {
			continue
		}
		from := origin(c, path+"/"+c.Name)
		if c.Name == "minRAMSize" {
			job.Requirements.RAMSize = n
			job.Requirements.SetOrigin("ram_size", from)
			continue
		}
		atLeast(&job.Requirements, key, n, from)
	}
}

func (d *decoder) resourceString(el *xmltree.Element, job *events.Job, sc *scope) {
	s, ok := d.only(el, sc.path, "string")
	if !ok {
		return
	}
	v, ok := d.nonEmptyScalar(s, sc.sub("string"), "stringElement")
	if !ok {
		return
	}
	r, from := &job.Requirements, origin(el, sc.path)
	switch {
	case el.Name == "schedulingPlugin":
		setAttribute(r, events.AttributeRequirement{Name: "scheduling_plugin", Pattern: v, From: from})
	case v == "fork":
		setRule(r, events.LRMSRule{Is: events.LRMSFork, From: from})
	case v == "scheduler":
		setRule(r, events.LRMSRule{IsNot: events.LRMSFork, From: from})
	default:
		d.list.Addf(s.Line, s.Col, sc.path+"/string", "%q is neither fork nor scheduler", v)
	}
}

// origin places a requirement at its element.
func origin(el *xmltree.Element, path string) events.Origin {
	return events.Origin{Field: path, Line: el.Line, Col: el.Col}
}

func atLeast(r *events.Requirements, name string, n int64, from events.Origin) {
	f := float64(n)
	setAttribute(r, events.AttributeRequirement{Name: name, AtLeast: &f, From: from})
}

// setAttribute adds a bound on an attribute, replacing the one already there (a
// subjob's resource overrides its job's).
func setAttribute(r *events.Requirements, a events.AttributeRequirement) {
	for i := range r.Attributes {
		if r.Attributes[i].Name == a.Name {
			r.Attributes[i] = a
			return
		}
	}
	r.Attributes = append(r.Attributes, a)
}

// setRule adds a rule on the LRMS, replacing one the same attribute set before (a
// subjob's jobManagerType or schedulingType overrides its job's).
func setRule(r *events.Requirements, l events.LRMSRule) {
	for i := range r.LRMS {
		if path.Base(r.LRMS[i].From.Field) == path.Base(l.From.Field) {
			r.LRMS[i] = l
			return
		}
	}
	r.LRMS = append(r.LRMS, l)
}

// contactHost makes the resource manager contact a placement requirement: the job runs
// only on a cluster one of whose hosts is the host the contact names. The spec writes
// the contact as a URL ("http://eros01.gridcenter.or.kr:8080"); a bare host or host:port
// is read the same way.
func (d *decoder) contactHost(outer, el *xmltree.Element, v string, job *events.Job, field string) {
	if v == "" {
		d.list.Add(el.Line, el.Col, field+"/string", "must name the resource manager's host")
		return
	}
	raw := v
	if !strings.Contains(raw, "://") {
		raw = "//" + raw
	}
	u, err := url.Parse(raw)
	host := ""
	if err == nil {
		host = u.Hostname()
	}
	if host == "" || strings.ContainsAny(host, "*?") {
		d.list.Addf(el.Line, el.Col, field+"/string", "%q is not a URL or host naming the resource manager", v)
		return
	}
	n := events.NameRequirement{AnyOf: []events.NamePattern{{Pattern: host}}, From: origin(outer, field)}
	r := &job.Requirements
	for i := range r.Hosts {
		if path.Base(r.Hosts[i].From.Field) == "resourceManagerContact" {
			r.Hosts[i] = n // a subjob's contact overrides its job's
			return
		}
	}
	r.Hosts = append(r.Hosts, n)
}
