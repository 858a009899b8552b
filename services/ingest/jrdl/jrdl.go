// Package jrdl reads MoreDream JRDL documents (specs/001, RSL2-based XML) into canonical
// jobs: every job of a document, every subjob of a job (inheriting the job's attributes
// and overriding them), substitutionDef/substitutionRef, and every job and resource
// attribute of the spec. A substitutionRef to a reserved name without a definition (HOME,
// JOBID, ...) is left as a {NAME} placeholder and listed in Job.Substitutions, since only
// the target knows its value. (Literal text that reads {NAME} for a reserved name the
// same job references is indistinguishable from the placeholder; JRDL has no braces of
// its own, so this needs a document that means the braces literally.)
package jrdl

import (
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/gridwire/gridwire/pkg/shellquote"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/services/ingest/internal/diag"
	"github.com/gridwire/gridwire/services/ingest/internal/xmltree"
)

// Reserved are the substitution names a target defines (the spec's Table 1). CUR_DIR
// is accepted beside the spec's spelling CUR_DIRL.
var Reserved = []string{"HOME", "LOGNAME", "GLOBUS_LOCATION", "X509_CERT_DIR", "GLOBUS_HOST_CPUTYPE",
	"GLOBUS_HOST_MANUFACTURER", "GLOBUS_HOST_OSNAME", "GLOBUS_HOST_OSVERSION", "GLOBUS_RMS_JOB_CONTACT",
	"GLOBUSRUN_GASS_URL", "JOBID", "CUR_DIRL", "CUR_DIR"}

// Decode turns a <jrdl> element into jobs: one job alone when the document holds one job
// without subjobs; otherwise a parent record followed by every runnable job (a job
// without subjobs, or each subjob of a job with them) in document order.
func Decode(root *xmltree.Element) ([]events.Job, []diag.Problem) {
	d := &decoder{defs: map[string]definition{}}
	if root.Name != "jrdl" {
		d.list.Addf(root.Line, root.Col, root.Name, "root element must be <jrdl>, not <%s>", root.Name)
		return nil, d.list.Problems
	}
	d.plainAttrs(root, "jrdl")
	var jobs []events.Job
	nJob, subjobs := 0, false
	for _, c := range root.Children {
		if d.over {
			break // past the expansion budget: what follows would only repeat it
		}
		switch c.Name {
		case "substitutionDef":
			d.define(c, "jrdl/substitutionDef", d.defs)
		case "job":
			made, hadSub := d.job(c, nJob)
			jobs = append(jobs, made...)
			subjobs = subjobs || hadSub
			nJob++
		default:
			d.unknown(c, "jrdl")
		}
	}
	if nJob == 0 && !d.over {
		d.list.Add(root.Line, root.Col, "jrdl", "holds no <job>")
	}
	if !d.list.Empty() {
		return nil, d.list.Problems
	}
	if len(jobs) == 1 && !subjobs {
		stageExecutable(&jobs[0])
		jobs[0].Original.Path = ""
		return jobs, nil
	}
	for i := range jobs {
		stageExecutable(&jobs[i])
	}
	parent := events.Job{Kind: events.KindGroup, Name: "jrdl"}
	return append([]events.Job{parent}, jobs...), nil
}

// MaxExpandedBytes bounds the text one document's substitutions may produce, so that
// definitions built from definitions cannot grow without limit. It is also a time
// budget: at 64 MiB a 6 KB document of nested definitions took a tenth of a second to
// refuse (seconds under the fuzzer, which stalled on it), at 1 MiB about 2 ms, and no
// job's text (executable, arguments, environment, paths) is anywhere near 1 MiB.
const MaxExpandedBytes = 1 << 20

type decoder struct {
	list  diag.List
	spent int                   // bytes of text substitutions have produced
	over  bool                  // the budget ran out (reported once)
	defs  map[string]definition // document-level substitution definitions
}

// definition is a substitutionDef's value and the reserved names left in it.
type definition struct {
	value    string
	reserved map[string]bool
	broken   bool // the definition had problems (already reported)
}

// scope is what a job element is read with: its substitutions and where it is.
type scope struct {
	defs     map[string]definition
	path     string
	reserved map[string]bool  // reserved names referenced, for Job.Substitutions
	counts   *counts          // processor counts said at this level
	policy   *xmltree.Element // the job's <coallocationPolicy>, if it has one
}

// counts are the two ways a level states processors: the co-allocation count and the
// resource count. Both become Job.Count and must agree when both are given.
type counts struct {
	coalloc, resource int64
	haveCo, haveRes   bool
	line, col         int // the resource count's position
	coLine, coCol     int // the co-allocation count's position
}

func (c *counts) check(d *decoder, path string) {
	if c.haveCo && c.haveRes && c.coalloc != c.resource {
		d.list.Addf(c.line, c.col, path+"/resource/count", "is %d, but count is %d; they must agree", c.resource, c.coalloc)
	}
}

func (d *decoder) job(el *xmltree.Element, index int) ([]events.Job, bool) {
	path := "job[" + strconv.Itoa(index) + "]"
	d.plainAttrs(el, path)
	sc := &scope{defs: copyDefs(d.defs), path: path, reserved: map[string]bool{}, counts: &counts{}}
	base := events.Job{}
	var subs []*xmltree.Element
	for _, c := range el.Children {
		switch c.Name {
		case "subjob":
			subs = append(subs, c)
		case "substitutionDef":
			d.define(c, path+"/substitutionDef", sc.defs)
		default:
			d.attribute(c, &base, sc, true)
		}
	}
	d.checkTimes(el, &base, path)
	sc.counts.check(d, path)
	if sc.policy != nil && (base.JobType == events.JobHTC || len(subs) == 0) {
		d.list.Add(sc.policy.Line, sc.policy.Col, path+"/coallocationPolicy",
			"applies to co-allocated subjobs; this job has none (no <subjob>, or jobType htc, whose instances run apart)")
	}
	if base.JobType == events.JobHTC {
		return d.htc(el, base, subs, sc), true
	}
	if len(subs) == 0 {
		base.Original.Path = path
		base.Substitutions = reservedUsed(sc.reserved)
		return []events.Job{base}, false
	}
	total := base.Count
	out := make([]events.Job, 0, len(subs))
	for k, s := range subs {
		spath := path + "/subjob[" + strconv.Itoa(k) + "]"
		d.plainAttrs(s, spath)
		job := clone(base)
		job.Coallocation = &events.Coallocation{Group: index, Size: len(subs), TotalCount: total}
		if base.Coallocation != nil {
			job.Coallocation.Contact, job.Coallocation.JobManager = base.Coallocation.Contact, base.Coallocation.JobManager
			job.Coallocation.OnSiblingEnd = base.Coallocation.OnSiblingEnd
		}
		out = append(out, d.subjob(s, spath, job, sc))
	}
	return out, true
}

// subjob reads one <subjob> over job (a copy of its parent's attributes) in a scope of
// its own, for the co-allocated and the htc readings alike.
func (d *decoder) subjob(s *xmltree.Element, spath string, job events.Job, sc *scope) events.Job {
	subScope := &scope{defs: sc.defs, path: spath, reserved: copySet(sc.reserved), counts: &counts{}}
	for _, c := range s.Children {
		if c.Name == "subjob" || c.Name == "substitutionDef" {
			d.list.Addf(c.Line, c.Col, spath+"/"+c.Name, "not allowed inside <subjob>")
			continue
		}
		d.attribute(c, &job, subScope, false)
	}
	d.checkTimes(s, &job, spath)
	subScope.counts.check(d, spath)
	job.Original.Path = spath
	job.Substitutions = reservedUsed(subScope.reserved)
	return job
}

func copyDefs(m map[string]definition) map[string]definition {
	out := make(map[string]definition, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func copySet(m map[string]bool) map[string]bool {
	out := make(map[string]bool, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// clone copies a job deeply enough that a subjob's attributes never change its job's.
func clone(j events.Job) events.Job {
	r := &j.Requirements
	r.Hosts, r.Targets, r.LRMS = slices.Clone(r.Hosts), slices.Clone(r.Targets), slices.Clone(r.LRMS)
	r.Software, r.Attributes, r.Unsupported = slices.Clone(r.Software), slices.Clone(r.Attributes), slices.Clone(r.Unsupported)
	r.Origins = maps.Clone(r.Origins)
	if j.Coallocation != nil {
		c := *j.Coallocation
		j.Coallocation = &c
	}
	return j
}

func reservedUsed(set map[string]bool) []string {
	var out []string
	for _, n := range Reserved {
		if set[n] {
			out = append(out, n)
		}
	}
	return out
}

// define reads a substitutionDef into defs.
func (d *decoder) define(el *xmltree.Element, path string, defs map[string]definition) {
	name, ok := d.requiredAttr(el, path, "name")
	d.onlyAttrs(el, path, "name")
	if !ok {
		return
	}
	if !shellquote.IsName(name) {
		d.list.Addf(el.Line, el.Col, path, "name %q is not a substitution name (letters, digits, '_')", name)
		return
	}
	if _, dup := defs[name]; dup {
		d.list.Addf(el.Line, el.Col, path, "%s is defined twice", name)
		return
	}
	sc := &scope{defs: defs, path: path, reserved: map[string]bool{}}
	value, ok := d.scalar(el, sc, "stringElement")
	// A definition may use reserved names; they stay placeholders in its value. A broken
	// one is kept as such, so its uses are not reported again as undefined.
	defs[name] = definition{value: value, reserved: sc.reserved, broken: !ok}
}

func isReserved(name string) bool {
	for _, r := range Reserved {
		if r == name {
			return true
		}
	}
	return false
}

// scalar reads the concatenation of <leaf value="..."/> and <substitutionRef name="..."/>
// children of el. leaf is stringElement or urlElement.
func (d *decoder) scalar(el *xmltree.Element, sc *scope, leaf string) (string, bool) {
	d.noText(el, sc.path)
	var b strings.Builder
	ok, parts := true, 0
	for _, c := range el.Children {
		cpath := sc.path + "/" + c.Name
		switch c.Name {
		case leaf:
			d.onlyAttrs(c, cpath, "value")
			d.noChildren(c, cpath)
			v, has := d.requiredAttr(c, cpath, "value")
			ok = ok && has
			b.WriteString(v)
		case "substitutionRef":
			d.onlyAttrs(c, cpath, "name")
			d.noChildren(c, cpath)
			name, has := d.requiredAttr(c, cpath, "name")
			if !has {
				ok = false
				continue
			}
			if def, defined := sc.defs[name]; defined {
				if def.broken || !d.charge(c, cpath, len(def.value)) {
					return "", false
				}
				b.WriteString(def.value)
				for n := range def.reserved {
					sc.reserved[n] = true
				}
			} else if isReserved(name) {
				sc.reserved[name] = true
				b.WriteString("{" + name + "}")
			} else {
				d.list.Addf(c.Line, c.Col, cpath, "%s is neither defined by a substitutionDef before it nor a reserved name", name)
				ok = false
			}
		default:
			d.list.Addf(c.Line, c.Col, cpath, "unknown element (expected <%s> or <substitutionRef>)", leaf)
			ok = false
		}
		parts++
	}
	if parts == 0 {
		d.list.Addf(el.Line, el.Col, sc.path, "is empty (expected <%s value=\"...\"/>)", leaf)
		ok = false
	}
	return b.String(), ok
}

// charge counts n bytes of substituted text against MaxExpandedBytes.
func (d *decoder) charge(el *xmltree.Element, path string, n int) bool {
	if d.spent += n; d.spent <= MaxExpandedBytes {
		return true
	}
	if !d.over {
		d.over = true
		d.list.Addf(el.Line, el.Col, path, "substitutions expand the document past %d bytes", MaxExpandedBytes)
	}
	return false
}

func (d *decoder) requiredAttr(el *xmltree.Element, path, name string) (string, bool) {
	v, ok := el.Attr(name)
	if !ok {
		d.list.Addf(el.Line, el.Col, path, "attribute %s is missing", name)
	}
	return v, ok
}

// onlyAttrs refuses attributes other than those named (namespace declarations and
// xsi: attributes aside).
func (d *decoder) onlyAttrs(el *xmltree.Element, path string, allowed ...string) {
	for _, a := range el.Attrs {
		if a.Space == "xmlns" || a.Name == "xmlns" && a.Space == "" || a.Space == xsiNamespace {
			continue
		}
		known := false
		for _, n := range allowed {
			known = known || a.Space == "" && a.Name == n
		}
		if !known {
			d.list.Addf(el.Line, el.Col, path, "unknown attribute %s", a.Name)
		}
	}
}

const xsiNamespace = "http://www.w3.org/2001/XMLSchema-instance"

func (d *decoder) plainAttrs(el *xmltree.Element, path string) { d.onlyAttrs(el, path) }

func (d *decoder) noText(el *xmltree.Element, path string) {
	if strings.TrimSpace(el.Text) != "" {
		d.list.Add(el.Line, el.Col, path, "holds text where only elements are allowed")
	}
}

func (d *decoder) noChildren(el *xmltree.Element, path string) {
	d.noText(el, path)
	for _, c := range el.Children {
		d.list.Addf(c.Line, c.Col, path+"/"+c.Name, "unknown element (<%s> has no children)", el.Name)
	}
}

func (d *decoder) unknown(el *xmltree.Element, parent string) {
	d.list.Add(el.Line, el.Col, parent+"/"+el.Name, "unknown element")
}

// only returns the single child of el named name, reporting anything else.
func (d *decoder) only(el *xmltree.Element, path, name string) (*xmltree.Element, bool) {
	d.plainAttrs(el, path)
	d.noText(el, path)
	var found *xmltree.Element
	for _, c := range el.Children {
		switch {
		case c.Name != name:
			d.list.Addf(c.Line, c.Col, path+"/"+c.Name, "unknown element (expected <%s>)", name)
		case found != nil:
			d.list.Addf(c.Line, c.Col, path+"/"+c.Name, "given twice")
		default:
			found = c
		}
	}
	if found == nil {
		d.list.Addf(el.Line, el.Col, path, "<%s> is missing", name)
		return nil, false
	}
	return found, true
}

// list returns every child of el named name, reporting anything else.
func (d *decoder) many(el *xmltree.Element, path, name string) []*xmltree.Element {
	d.plainAttrs(el, path)
	d.noText(el, path)
	var out []*xmltree.Element
	for _, c := range el.Children {
		if c.Name != name {
			d.list.Addf(c.Line, c.Col, path+"/"+c.Name, "unknown element (expected <%s>)", name)
			continue
		}
		out = append(out, c)
	}
	return out
}

// MaxHTCInstances bounds the jobs one htc job becomes: each is a record in the log and a
// process on a target.
const MaxHTCInstances = 1000

// htc splits a high-throughput job into independent instances, as the spec's Figure 5
// reads: the job's count is how many instances run; each <subjob> is one instance with
// its own attributes over the job's, and the instances left over run the job's own. An
// instance has one processor unless its subjob says otherwise, and instances are not
// co-allocated (each runs when and where it can).
func (d *decoder) htc(el *xmltree.Element, base events.Job, subs []*xmltree.Element, sc *scope) []events.Job {
	path := sc.path
	n := int(sc.counts.coalloc)
	if sc.counts.haveRes {
		n = int(sc.counts.resource)
	}
	if !sc.counts.haveCo && !sc.counts.haveRes {
		n = max(1, len(subs))
	}
	line, col := el.Line, el.Col
	if sc.counts.haveRes {
		line, col = sc.counts.line, sc.counts.col
	} else if sc.counts.haveCo {
		line, col = sc.counts.coLine, sc.counts.coCol
	}
	switch {
	case n < len(subs) || n < 1:
		d.list.Addf(line, col, path+"/count", "an htc job's count is its number of instances: %d is fewer than its %d subjobs", n, len(subs))
		return nil
	case n > MaxHTCInstances:
		d.list.Addf(line, col, path+"/count", "an htc job's count is its number of instances: %d is over the limit of %d", n, MaxHTCInstances)
		return nil
	}
	base.Count, base.Requirements.Processors = 1, 0
	delete(base.Requirements.Origins, "processors")
	if base.Coallocation != nil {
		base.Coallocation.Group, base.Coallocation.Size, base.Coallocation.TotalCount = 0, 0, 0
	}
	out := make([]events.Job, 0, n)
	for k, s := range subs {
		spath := path + "/subjob[" + strconv.Itoa(k) + "]"
		d.plainAttrs(s, spath)
		job := clone(base)
		out = append(out, d.subjob(s, spath, job, sc))
	}
	for k := len(subs); k < n; k++ {
		job := clone(base)
		job.Original.Path = path + "/instance[" + strconv.Itoa(k) + "]"
		job.Substitutions = reservedUsed(sc.reserved)
		out = append(out, job)
	}
	return out
}
