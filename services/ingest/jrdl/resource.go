package jrdl

import (
	"strconv"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/services/ingest/internal/xmltree"
)

// resource reads the resource attributes (user preferences for selection).
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
			}
		case "operatingSystem":
			if name, ok := d.only(c, path, "name"); ok {
				if s, ok := d.only(name, path+"/name", "string"); ok {
					r.OSName, _ = d.nonEmptyScalar(s, sc.sub(c.Name+"/name/string"), "stringElement")
				}
			}
		case "processor":
			if speed, ok := d.only(c, path, "clockSpeed"); ok {
				if mhz, ok := d.integer(speed, path+"/clockSpeed"); ok {
					r.CPUHz = mhz * 1_000_000
				}
			}
		case "minMainMemory":
			d.resourceGroup(c, path, job, map[string]string{"minRAMAvailable": "minRAMAvailable", "minRAMSize": ""})
		case "minStorage":
			d.resourceGroup(c, path, job, map[string]string{"minStorageAvailable": "minStorageAvailable"})
		case "processorLoad":
			d.resourceGroup(c, path, job, map[string]string{"last15Min": "last15Min", "last5Min": "last5Min", "last1Min": "last1Min"})
		case "minFreeCPU":
			if n, ok := d.integer(c, path); ok {
				setResource(r, "minFreeCPU", strconv.FormatInt(n, 10))
			}
		case "schedulingType", "schedulingPlugin":
			d.resourceString(c, job, sc.sub(c.Name))
		default:
			d.unknown(c, sc.path)
		}
	}
}

// resourceGroup reads a container of integer attributes; keys maps each allowed child
// to its Resources name ("" for minRAMSize, which is Requirements.RAMSize).
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
		if c.Name == "minRAMSize" {
			job.Requirements.RAMSize = n
			continue
		}
		setResource(&job.Requirements, key, strconv.FormatInt(n, 10))
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
	if el.Name == "schedulingType" && v != "fork" && v != "scheduler" {
		d.list.Addf(s.Line, s.Col, sc.path+"/string", "%q is neither fork nor scheduler", v)
		return
	}
	setResource(&job.Requirements, el.Name, v)
}

func setResource(r *events.Requirements, key, value string) {
	if r.Resources == nil {
		r.Resources = map[string]string{}
	}
	r.Resources[key] = value
}
