// Package jsdl reads OGF JSDL 1.0 documents (GFD.56) into canonical jobs, with the POSIX
// application extension (GFD.56), the HPC Profile Application extension (GFD.111) and
// the SPMD extension (GFD.115). One <JobDefinition> is one job. Elements the gateway
// cannot honour (process limits it cannot enforce, file systems it does not know) are
// refused by name and position, never dropped.
package jsdl

import (
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/services/ingest/internal/diag"
	"github.com/gridwire/gridwire/services/ingest/internal/xmltree"
)

// The namespaces of JSDL and its extensions.
const (
	NS      = "http://schemas.ggf.org/jsdl/2005/11/jsdl"
	NSPOSIX = "http://schemas.ggf.org/jsdl/2005/11/jsdl-posix"
	NSHPCPA = "http://schemas.ggf.org/jsdl/2006/07/jsdl-hpcpa"
	NSSPMD  = "http://schemas.ogf.org/jsdl/2007/02/jsdl-spmd"
	// NSGPE is gridwire's extension inside jsdl:Application (JSDL admits elements of
	// other namespaces there): Field elements set the GPE profile application's template
	// fields, Variation chooses an invocation variation of its template.
	NSGPE = "urn:gridwire:jsdl-gpe"
)

// Root is the local name of a JSDL document's root element.
const Root = "JobDefinition"

type decoder struct {
	list diag.List
	// streams are Input, Output and Error as named; linked to DataStaging at the end.
	streams []stream
}

// stream is one of jsdl-posix Input/Output/Error: a file name in the job's directory.
type stream struct {
	kind string // Input, Output, Error
	name string
	el   *xmltree.Element
	path string
}

// Decode turns a <jsdl:JobDefinition> into one job.
func Decode(root *xmltree.Element) ([]events.Job, []diag.Problem) {
	d := &decoder{}
	if root.Name != Root || root.Space != NS {
		d.list.Addf(root.Line, root.Col, root.Name, "root element must be <JobDefinition> in namespace %s", NS)
		return nil, d.list.Problems
	}
	d.attrs(root, "JobDefinition", "id")
	job := events.Job{}
	if id, ok := root.Attr("id"); ok {
		d.extra(&job, "JobDefinition@id", id) // the document's own name for the job, kept
	}
	desc := d.one(root, "JobDefinition", NS, "JobDescription")
	if desc != nil {
		d.description(desc, &job)
	}
	if !d.list.Empty() {
		return nil, d.list.Problems
	}
	return []events.Job{job}, nil
}

func (d *decoder) description(el *xmltree.Element, job *events.Job) {
	const path = "JobDescription"
	d.attrs(el, path)
	d.noText(el, path)
	seen := map[string]bool{}
	var app *xmltree.Element
	staging := 0
	for _, c := range el.Children {
		p := path + "/" + c.Name
		if !d.inNS(c, p, NS) {
			continue
		}
		if c.Name == "DataStaging" {
			p += "[" + strconv.Itoa(staging) + "]"
			staging++
		}
		if c.Name == "Application" && app == nil {
			app = c
		}
		if c.Name != "DataStaging" && seen[c.Name] {
			d.list.Add(c.Line, c.Col, p, "given twice")
			continue
		}
		seen[c.Name] = true
		switch c.Name {
		case "JobIdentification":
			d.identification(c, p, job)
		case "Application":
			d.application(c, p, job)
		case "Resources":
			d.resources(c, p, job)
		case "DataStaging":
			d.staging(c, p, job)
		default:
			d.list.Add(c.Line, c.Col, p, "unknown element")
		}
	}
	d.linkStreams(job)
	if job.Executable == "" && app != nil {
		d.list.Add(app.Line, app.Col, path+"/Application", "names no Executable (a POSIXApplication, HPCProfileApplication or SPMDApplication must give one)")
	} else if !seen["Application"] {
		d.list.Add(el.Line, el.Col, path, "has no <Application>; the gateway runs only jobs that name an executable")
	}
}

func (d *decoder) identification(el *xmltree.Element, path string, job *events.Job) {
	d.attrs(el, path)
	d.noText(el, path)
	for _, c := range el.Children {
		p := path + "/" + c.Name
		if !d.inNS(c, p, NS) {
			continue
		}
		switch c.Name {
		case "JobName":
			job.Name = d.text(c, p, true)
		case "Description", "JobAnnotation", "JobProject":
			// Descriptive text for people; kept under its JSDL name.
			d.extra(job, "JobIdentification/"+c.Name, d.text(c, p, false))
		default:
			d.list.Add(c.Line, c.Col, p, "unknown element")
		}
	}
}

func (d *decoder) application(el *xmltree.Element, path string, job *events.Job) {
	d.attrs(el, path)
	d.noText(el, path)
	var app events.Application
	kinds := 0
	for _, c := range el.Children {
		p := path + "/" + c.Name
		switch {
		case c.Space == NS && c.Name == "ApplicationName":
			app.Name = d.text(c, p, true)
		case c.Space == NS && c.Name == "ApplicationVersion":
			app.Version = d.text(c, p, true)
		case c.Space == NS && c.Name == "Description":
			d.extra(job, "Application/Description", d.text(c, p, false))
		case c.Space == NSGPE && c.Name == "Field":
			d.field(c, p, job)
		case c.Space == NSGPE && c.Name == "Variation":
			if app.Variation != "" {
				d.list.Add(c.Line, c.Col, p, "given twice")
			}
			app.Variation = d.text(c, p, true)
		case c.Space == NSPOSIX && c.Name == "POSIXApplication",
			c.Space == NSHPCPA && c.Name == "HPCProfileApplication",
			c.Space == NSSPMD && c.Name == "SPMDApplication":
			if kinds++; kinds > 1 {
				d.list.Add(c.Line, c.Col, p, "a second application kind; JSDL allows one")
				continue
			}
			d.program(c, p, job)
		default:
			d.list.Addf(c.Line, c.Col, p, "unknown element in namespace %q", c.Space)
		}
	}
	if app.Version != "" && app.Name == "" {
		d.list.Add(el.Line, el.Col, path+"/ApplicationVersion", "given without ApplicationName")
	}
	if app.Variation != "" && app.Name == "" {
		d.list.Add(el.Line, el.Col, path+"/Variation", "given without ApplicationName (a variation is one of the application's)")
	}
	if app.Name != "" {
		job.Application = &app
	}
}

// fieldName is what a GPE profile field name may be.
var fieldName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_:.-]{0,127}$`)

// field reads <gpe:Field name="N">value</gpe:Field>: a value for a template field.
func (d *decoder) field(el *xmltree.Element, path string, job *events.Job) {
	d.attrs(el, path, "name")
	name, _ := el.Attr("name")
	v := d.text(el, path, false)
	switch {
	case !fieldName.MatchString(name):
		d.list.Addf(el.Line, el.Col, path, "attribute name %q is not a profile field name (a letter or '_', then letters, digits, '_', ':', '.', '-')", name)
		return
	case hasKey(job.Fields, name):
		d.list.Addf(el.Line, el.Col, path, "field %s given twice", name)
		return
	}
	if job.Fields == nil {
		job.Fields = map[string]string{}
	}
	job.Fields[name] = v
}

func hasKey(m map[string]string, k string) bool {
	_, ok := m[k]
	return ok
}

// program reads a POSIXApplication, HPCProfileApplication or SPMDApplication: the three
// share their elements, SPMD adds the process layout.
func (d *decoder) program(el *xmltree.Element, path string, job *events.Job) {
	d.attrs(el, path, "name")
	d.noText(el, path)
	ns := el.Space
	seen := map[string]bool{}
	for _, c := range el.Children {
		p := path + "/" + c.Name
		if !d.inNS(c, p, ns) {
			continue
		}
		if c.Name != "Argument" && c.Name != "Environment" && seen[c.Name] {
			d.list.Add(c.Line, c.Col, p, "given twice")
			continue
		}
		seen[c.Name] = true
		d.programElement(c, p, ns, job)
	}
	if ns == NSSPMD {
		job.MPI, job.JobType = true, events.JobMPI
		if job.Count == 0 {
			job.Count = 1
		}
	}
}

// programElement reads one child of a POSIX, HPCPA or SPMD application element.
func (d *decoder) programElement(c *xmltree.Element, p, ns string, job *events.Job) {
	switch c.Name {
	case "Executable":
		job.Executable = d.text(c, p, true)
	case "Argument":
		job.Arguments = append(job.Arguments, d.text(c, p, false))
	case "Input", "Output", "Error":
		if v := d.relPath(c, p); v != "" {
			d.streams = append(d.streams, stream{kind: c.Name, name: v, el: c, path: p})
		}
	case "WorkingDirectory":
		job.Directory = d.text(c, p, true)
	case "Environment":
		d.environment(c, p, job)
	case "WallTimeLimit", "MemoryLimit", "NumberOfProcesses", "ProcessesPerHost", "SPMDVariation":
		d.programLimit(c, p, ns, job)
	case "PipeSizeLimit":
		d.list.Add(c.Line, c.Col, p, "not supported: no POSIX resource limit bounds a pipe's size (ulimit -p only reads it), so the gateway refuses the job rather than ignore it")
	case "ProcessCountLimit":
		d.list.Add(c.Line, c.Col, p, "not supported: the POSIX process limit counts every process of the account the job runs as on the target, not the job's, so the gateway refuses the job rather than enforce something else")
	case "ThreadCountLimit":
		d.list.Add(c.Line, c.Col, p, "not supported: no POSIX resource limit counts a job's threads, so the gateway refuses the job rather than ignore it")
	case "ThreadsPerProcess":
		d.list.Add(c.Line, c.Col, p, "not supported: the gateway cannot lay out threads per process on every target, so it refuses the job rather than ignore it")
	case "UserName", "GroupName":
		d.list.Add(c.Line, c.Col, p, "not supported: jobs run as the gateway's account on the target, never as a named user or group")
	default:
		r, ok := resourceLimits[c.Name]
		if !ok {
			d.list.Add(c.Line, c.Col, p, "unknown element")
			return
		}
		if n, ok := d.number(c, p, ns == NSPOSIX || ns == NSSPMD); ok {
			job.Limits = append(job.Limits, events.Limit{Resource: r, Value: n})
		}
	}
}

// resourceLimits are the POSIX limits a job's program runs under, by their JSDL names
// (seconds for CPU time, a count of descriptors, bytes for the rest, as JSDL gives them).
var resourceLimits = map[string]events.LimitResource{
	"CPUTimeLimit": events.LimitCPUTime, "FileSizeLimit": events.LimitFileSize,
	"CoreDumpLimit": events.LimitCoreSize, "DataSegmentLimit": events.LimitDataSize,
	"LockedMemoryLimit": events.LimitLockedMemory, "OpenDescriptorsLimit": events.LimitOpenFiles,
	"StackSizeLimit": events.LimitStackSize, "VirtualMemoryLimit": events.LimitVirtualMemory,
}

// environment reads one Environment element: a variable of the job.
func (d *decoder) environment(c *xmltree.Element, p string, job *events.Job) {
	d.attrs(c, p, "name", "filesystemName")
	if _, fs := c.Attr("filesystemName"); fs {
		d.list.Add(c.Line, c.Col, p, "attribute filesystemName is not supported (the gateway defines no JSDL file systems)")
	}
	name, ok := c.Attr("name")
	if !ok || !validEnvName(name) {
		d.list.Addf(c.Line, c.Col, p, "attribute name %q is not an environment variable name (letters, digits, '_')", name)
		return
	}
	job.Environment = append(job.Environment, events.EnvVar{Name: name, Value: d.text(c, p, false)})
}

// programLimit reads the limits and process counts the gateway acts on.
func (d *decoder) programLimit(c *xmltree.Element, p, ns string, job *events.Job) {
	switch c.Name {
	case "WallTimeLimit":
		if n, ok := d.number(c, p, ns == NSPOSIX || ns == NSSPMD); ok {
			if n > math.MaxInt64/int64(time.Second) {
				d.list.Add(c.Line, c.Col, p, "is too large")
				return
			}
			job.Duration = time.Duration(n) * time.Second
		}
	case "MemoryLimit":
		if n, ok := d.number(c, p, ns == NSPOSIX || ns == NSSPMD); ok {
			atLeastMB(&job.Requirements, &job.Requirements.RAMSize, "ram_size", n, c, p)
		}
	case "NumberOfProcesses":
		if n, ok := d.count(c, p, ns == NSSPMD); ok {
			job.Count = int(n)
			job.Requirements.Processors = n
			job.Requirements.SetOrigin("processors", origin(c, p))
		}
	case "ProcessesPerHost":
		if n, ok := d.count(c, p, ns == NSSPMD); ok {
			job.Requirements.SMPSize = n
			job.Requirements.SetOrigin("smp_size", origin(c, p))
		}
	case "SPMDVariation":
		if ns != NSSPMD {
			d.list.Add(c.Line, c.Col, p, "unknown element")
			return
		}
		if v := d.text(c, p, true); v != "" && !mpiVariation(v) {
			d.list.Addf(c.Line, c.Col, p, "%q is not an MPI variation the gateway runs (one of the jsdl-spmd MPI, MPICH1, MPICH2, OpenMPI, IntelMPI, LAM-MPI URIs)", v)
		}
	}
}

func mpiVariation(v string) bool {
	for _, s := range []string{"MPI", "MPICH1", "MPICH2", "OpenMPI", "IntelMPI", "LAM-MPI"} {
		if v == NSSPMD+"/"+s || v == "http://www.ogf.org/jsdl/2007/02/jsdl-spmd/"+s {
			return true
		}
	}
	return false
}

func validEnvName(s string) bool {
	if s == "" || s[0] >= '0' && s[0] <= '9' {
		return false
	}
	for _, r := range s {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

// atLeastMB raises a requirement in megabytes (*dst, named field) to n bytes, rounded
// up, when that is more than it asks already, and records where the bound came from.
func atLeastMB(r *events.Requirements, dst *int64, field string, n int64, el *xmltree.Element, path string) {
	if mb := (n + (1<<20 - 1)) >> 20; mb > *dst {
		*dst = mb
		r.SetOrigin(field, origin(el, path))
	}
}

func origin(el *xmltree.Element, path string) events.Origin {
	return events.Origin{Field: path, Line: el.Line, Col: el.Col}
}

// extra keeps descriptive text under its JSDL name; an element that may repeat
// (JobAnnotation, JobProject) keeps each: the second under KEY[1], the third KEY[2].
func (d *decoder) extra(job *events.Job, key, v string) {
	if v == "" {
		return
	}
	if job.Extra == nil {
		job.Extra = map[string]string{}
	}
	k := key
	for n := 1; ; n++ {
		if _, taken := job.Extra[k]; !taken {
			break
		}
		k = key + "[" + strconv.Itoa(n) + "]"
	}
	job.Extra[k] = v
}

// relPath reads a file name in the job's directory.
func (d *decoder) relPath(el *xmltree.Element, path string) string {
	d.attrs(el, path, "filesystemName")
	if _, fs := el.Attr("filesystemName"); fs {
		d.list.Add(el.Line, el.Col, path, "attribute filesystemName is not supported (the gateway defines no JSDL file systems)")
	}
	v := d.text(el, path, true)
	return v
}

// text reads an element's text, trimmed, with no attributes of its own.
func (d *decoder) text(el *xmltree.Element, path string, required bool) string {
	for _, c := range el.Children {
		d.list.Addf(c.Line, c.Col, path+"/"+c.Name, "unknown element (<%s> holds text only)", el.Name)
	}
	v := strings.TrimSpace(el.Text)
	if required && v == "" {
		d.list.Add(el.Line, el.Col, path, "is empty")
	}
	if strings.ContainsRune(v, 0) {
		d.list.Add(el.Line, el.Col, path, "holds a NUL character")
	}
	return v
}

// number reads a non-negative integer (POSIX limits are xsd:nonNegativeInteger).
func (d *decoder) number(el *xmltree.Element, path string, allowed bool) (int64, bool) {
	if !allowed {
		d.list.Add(el.Line, el.Col, path, "unknown element")
		return 0, false
	}
	d.attrs(el, path)
	v := d.text(el, path, true)
	if v == "" {
		return 0, false
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		d.list.Addf(el.Line, el.Col, path, "%q is not a non-negative integer", v)
		return 0, false
	}
	return n, true
}

func (d *decoder) count(el *xmltree.Element, path string, allowed bool) (int64, bool) {
	n, ok := d.number(el, path, allowed)
	if ok && (n < 1 || n > math.MaxInt32) {
		d.list.Addf(el.Line, el.Col, path, "%d is not a process count (1 to %d)", n, math.MaxInt32)
		return 0, false
	}
	return n, ok
}

// attrs refuses attributes other than those named (namespace declarations, xsi: and
// attributes of other namespaces, which JSDL's anyAttribute allows, aside).
func (d *decoder) attrs(el *xmltree.Element, path string, allowed ...string) {
	for _, a := range el.Attrs {
		if a.Space != "" || a.Name == "xmlns" {
			continue
		}
		known := false
		for _, n := range allowed {
			known = known || a.Name == n
		}
		if !known {
			d.list.Addf(el.Line, el.Col, path, "unknown attribute %s", a.Name)
		}
	}
}

func (d *decoder) noText(el *xmltree.Element, path string) {
	if strings.TrimSpace(el.Text) != "" {
		d.list.Add(el.Line, el.Col, path, "holds text where only elements are allowed")
	}
}

// inNS reports whether el is in ns, reporting it otherwise.
func (d *decoder) inNS(el *xmltree.Element, path, ns string) bool {
	if el.Space == ns {
		return true
	}
	d.list.Addf(el.Line, el.Col, path, "unknown element (expected namespace %s, not %q)", ns, el.Space)
	return false
}

// one returns the single child named name in ns, reporting anything else.
func (d *decoder) one(el *xmltree.Element, path, ns, name string) *xmltree.Element {
	d.noText(el, path)
	var found *xmltree.Element
	for _, c := range el.Children {
		switch {
		case c.Name != name || c.Space != ns:
			d.list.Addf(c.Line, c.Col, path+"/"+c.Name, "unknown element (expected <%s>)", name)
		case found != nil:
			d.list.Add(c.Line, c.Col, path+"/"+c.Name, "given twice")
		default:
			found = c
		}
	}
	if found == nil {
		d.list.Addf(el.Line, el.Col, path, "<%s> is missing", name)
	}
	return found
}

// linkStreams connects Input, Output and Error with the DataStaging of the same file
// name. The gateway moves standard streams itself: standard input is fetched from the
// staging's Source (and the file is staged under its name as well), standard output and
// error go to the staging's Target (and to the job's own stdout/stderr files, which
// `gridwire logs` shows). A stream with no such staging would name a file nobody reads or
// provides, so it is refused rather than silently renamed.
func (d *decoder) linkStreams(job *events.Job) {
	for _, s := range d.streams {
		switch s.kind {
		case "Input":
			found := false
			for _, f := range job.StageIn {
				if f.To == s.name {
					job.Stdin, found = f.From, true
				}
			}
			if !found {
				d.list.Addf(s.el.Line, s.el.Col, s.path, "%q is not staged in: give a DataStaging with this FileName and a Source", s.name)
			}
		case "Output", "Error":
			var dest []string
			kept := job.StageOut[:0]
			for _, f := range job.StageOut {
				if f.From == s.name {
					dest = append(dest, f.To)
				} else {
					kept = append(kept, f)
				}
			}
			job.StageOut = kept
			if len(job.StageOut) == 0 {
				job.StageOut = nil
			}
			if dest == nil {
				// No staging sends it anywhere: the stream goes to that file in the
				// job's directory (a relative destination with no storage base).
				dest = []string{s.name}
			}
			if s.kind == "Output" {
				job.Stdout = append(job.Stdout, dest...)
			} else {
				job.Stderr = append(job.Stderr, dest...)
			}
		}
	}
}
