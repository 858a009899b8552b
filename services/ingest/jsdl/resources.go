package jsdl

import (
	"math"
	"path"
	"strconv"
	"strings"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/services/ingest/internal/xmltree"
)

// resources reads jsdl:Resources into canonical requirements: CandidateHosts a host
// requirement, OperatingSystem and CPUArchitecture patterns on the target's system info,
// the CPU counts lower bounds on processors (TotalCPUCount, which also sets the job's
// count) and processors per host (IndividualCPUCount), the physical and virtual memory
// lower bounds on ram_size and virtual_size (megabytes, rounded up), the CPU speed one on
// cpu_hz. A range's lower bound is the requirement; an upper bound alone cannot be
// met by choosing a bigger target and is refused.
func (d *decoder) resources(el *xmltree.Element, p string, job *events.Job) {
	d.attrs(el, p)
	d.noText(el, p)
	r := &job.Requirements
	for _, c := range el.Children {
		cp := p + "/" + c.Name
		if !d.inNS(c, cp, NS) {
			continue
		}
		switch c.Name {
		case "CandidateHosts":
			d.attrs(c, cp)
			d.noText(c, cp)
			n := events.NameRequirement{From: origin(c, cp)}
			for _, h := range c.Children {
				hp := cp + "/" + h.Name
				if !d.inNS(h, hp, NS) {
					continue
				}
				if h.Name != "HostName" {
					d.list.Add(h.Line, h.Col, hp, "unknown element (expected <HostName>)")
					continue
				}
				if v := d.text(h, hp, true); v != "" {
					n.AnyOf = append(n.AnyOf, events.NamePattern{Pattern: v})
				}
			}
			if len(c.Children) == 0 {
				d.list.Add(c.Line, c.Col, cp, "names no <HostName>")
			}
			if len(n.AnyOf) > 0 {
				r.Hosts = append(r.Hosts, n)
			}
		case "OperatingSystem":
			d.os(c, cp, r)
		case "CPUArchitecture":
			name := d.one(c, cp, NS, "CPUArchitectureName")
			if name != nil {
				if v := d.text(name, cp+"/CPUArchitectureName", true); v != "" {
					r.Platform = archPattern(v)
					r.SetOrigin("platform", origin(name, cp+"/CPUArchitectureName"))
				}
			}
		case "TotalCPUCount":
			if n, ok := d.lower(c, cp); ok {
				r.Processors = n
				r.SetOrigin("processors", origin(c, cp))
				if job.Count == 0 {
					job.Count = int(n)
				}
			}
		case "IndividualCPUCount":
			if n, ok := d.lower(c, cp); ok {
				r.SMPSize = n
				r.SetOrigin("smp_size", origin(c, cp))
			}
		case "IndividualPhysicalMemory", "TotalPhysicalMemory":
			if n, ok := d.lower(c, cp); ok {
				atLeastMB(r, &r.RAMSize, "ram_size", n, c, cp)
			}
		case "IndividualVirtualMemory", "TotalVirtualMemory":
			if n, ok := d.lower(c, cp); ok {
				atLeastMB(r, &r.VirtualSize, "virtual_size", n, c, cp)
			}
		case "IndividualCPUSpeed":
			if n, ok := d.lower(c, cp); ok {
				r.CPUHz = n
				r.SetOrigin("cpu_hz", origin(c, cp))
			}
		case "ExclusiveExecution", "FileSystem", "IndividualCPUTime", "IndividualNetworkBandwidth",
			"IndividualDiskSpace", "TotalCPUTime", "TotalDiskSpace", "TotalResourceCount":
			d.list.Add(c.Line, c.Col, cp, "not supported: the gateway has no way to check or enforce it, so it refuses the job rather than ignore it")
		default:
			d.list.Add(c.Line, c.Col, cp, "unknown element")
		}
	}
}

func (d *decoder) os(el *xmltree.Element, p string, r *events.Requirements) {
	d.attrs(el, p)
	d.noText(el, p)
	for _, c := range el.Children {
		cp := p + "/" + c.Name
		if !d.inNS(c, cp, NS) {
			continue
		}
		switch c.Name {
		case "OperatingSystemType":
			name := d.one(c, cp, NS, "OperatingSystemName")
			if name != nil {
				if v := d.text(name, cp+"/OperatingSystemName", true); v != "" {
					r.OSName = osPattern(v)
					r.SetOrigin("os_name", origin(name, cp+"/OperatingSystemName"))
				}
			}
		case "OperatingSystemVersion":
			if v := d.text(c, cp, true); v != "" {
				r.OSRelease = v
				r.SetOrigin("os_release", origin(c, cp))
			}
		case "Description":
			d.text(c, cp, false)
		default:
			d.list.Add(c.Line, c.Col, cp, "unknown element")
		}
	}
}

// osPattern turns JSDL's OperatingSystemTypeEnumeration (LINUX, MACOS, ...) into the
// pattern on the target's os_name (Linux, Darwin ...), matched ignoring case.
func osPattern(v string) string {
	switch v {
	case "MACOS":
		return "Darwin"
	case "Solaris", "SunOS":
		return "SunOS"
	}
	return v
}

// archPattern turns JSDL's ProcessorArchitectureEnumeration into the target's platform
// (uname -m).
func archPattern(v string) string {
	switch v {
	case "x86_64":
		return "x86_64"
	case "x86_32", "x86":
		return "i?86"
	case "arm":
		return "a*"
	case "ia64":
		return "ia64"
	case "powerpc":
		return "p*"
	}
	return v
}

// lower reads a RangeValue_Type and returns its lower bound: Exact,
// LowerBoundedRange, or Range/LowerBound.
func (d *decoder) lower(el *xmltree.Element, p string) (int64, bool) {
	d.attrs(el, p)
	d.noText(el, p)
	var best float64
	found := false
	for _, c := range el.Children {
		cp := p + "/" + c.Name
		if !d.inNS(c, cp, NS) {
			continue
		}
		var v float64
		var ok bool
		switch c.Name {
		case "Exact", "LowerBoundedRange":
			d.attrs(c, cp, "epsilon", "exclusiveBound")
			v, ok = d.float(c, cp)
		case "Range":
			// The upper bound only narrows the range; the lower one is the requirement.
			d.attrs(c, cp)
			d.noText(c, cp)
			var lb *xmltree.Element
			for _, b := range c.Children {
				bp := cp + "/" + b.Name
				switch {
				case !d.inNS(b, bp, NS):
				case b.Name == "LowerBound" && lb == nil:
					lb = b
				case b.Name == "UpperBound":
					d.attrs(b, bp, "exclusiveBound")
					d.float(b, bp)
				default:
					d.list.Add(b.Line, b.Col, bp, "unknown element or given twice (expected one <LowerBound> and one <UpperBound>)")
				}
			}
			if lb == nil {
				d.list.Add(c.Line, c.Col, cp, "<LowerBound> is missing (the gateway chooses targets by lower bounds)")
				continue
			}
			d.attrs(lb, cp+"/LowerBound", "exclusiveBound")
			v, ok = d.float(lb, cp+"/LowerBound")
		case "UpperBoundedRange":
			d.list.Add(c.Line, c.Col, cp, "an upper bound alone is not supported (the gateway chooses targets by lower bounds)")
		default:
			d.list.Add(c.Line, c.Col, cp, "unknown element")
		}
		if ok && (!found || v < best) {
			best, found = v, true
		}
	}
	if len(el.Children) == 0 {
		d.list.Add(el.Line, el.Col, p, "holds no Exact, LowerBoundedRange or Range")
	}
	if !found {
		return 0, false
	}
	return int64(math.Ceil(best)), true
}

func (d *decoder) float(el *xmltree.Element, p string) (float64, bool) {
	v := d.text(el, p, true)
	if v == "" {
		return 0, false
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || f < 0 || math.IsNaN(f) || f > 1<<53 {
		d.list.Addf(el.Line, el.Col, p, "%q is not a non-negative number", v)
		return 0, false
	}
	return f, true
}

// staging reads one jsdl:DataStaging: a Source stages the file in, a Target stages it
// out, DeleteOnTermination removes it when the job is cleaned up.
func (d *decoder) staging(el *xmltree.Element, p string, job *events.Job) {
	d.attrs(el, p, "name")
	d.noText(el, p)
	var name, flag, from, to string
	del := false
	var nameEl *xmltree.Element
	for _, c := range el.Children {
		cp := p + "/" + c.Name
		if !d.inNS(c, cp, NS) {
			continue
		}
		switch c.Name {
		case "FileName":
			name, nameEl = d.text(c, cp, true), c
		case "CreationFlag":
			flag = d.text(c, cp, true)
			switch flag {
			case "overwrite", "dontOverwrite", "":
			case "append":
				d.list.Add(c.Line, c.Col, cp, "append is not supported: the stager writes whole files")
			default:
				d.list.Addf(c.Line, c.Col, cp, "%q is not overwrite, dontOverwrite or append", flag)
			}
		case "DeleteOnTermination":
			switch v := d.text(c, cp, true); v {
			case "true", "1":
				del = true
			case "false", "0", "":
			default:
				d.list.Addf(c.Line, c.Col, cp, "%q is not a boolean", v)
			}
		case "Source", "Target":
			u := d.one(c, cp, NS, "URI")
			if u == nil {
				continue
			}
			v := d.text(u, cp+"/URI", true)
			if v != "" && !strings.Contains(v, "://") {
				d.list.Addf(u.Line, u.Col, cp+"/URI", "%q is not a URI (scheme://...)", v)
			}
			if c.Name == "Source" {
				from = v
			} else {
				to = v
			}
		case "FilesystemName":
			d.list.Add(c.Line, c.Col, cp, "not supported: the gateway defines no JSDL file systems; FileName is in the job's directory")
		default:
			d.list.Add(c.Line, c.Col, cp, "unknown element")
		}
	}
	if nameEl == nil {
		d.list.Add(el.Line, el.Col, p, "<FileName> is missing")
		return
	}
	if name == "" {
		return
	}
	if path.IsAbs(name) || strings.HasPrefix(path.Clean(name), "..") {
		d.list.Addf(nameEl.Line, nameEl.Col, p+"/FileName", "%q must be a relative path inside the job's directory", name)
		return
	}
	if from == "" && to == "" && !del {
		d.list.Add(el.Line, el.Col, p, "has neither Source nor Target nor DeleteOnTermination: it does nothing")
	}
	if from != "" {
		for _, f := range job.StageIn {
			if f.To == name {
				d.list.Addf(nameEl.Line, nameEl.Col, p+"/FileName", "%q is staged in twice (the second would overwrite the first)", name)
			}
		}
		job.StageIn = append(job.StageIn, events.FileCopy{From: from, To: name})
	}
	if to != "" {
		job.StageOut = append(job.StageOut, events.FileCopy{From: name, To: to})
	}
	if del {
		job.Cleanup = append(job.Cleanup, name)
	}
}
