package jrdl

import (
	"github.com/gridwire/gridwire/pkg/shellquote"
	"strconv"
	"strings"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/services/ingest/internal/xmltree"
)

// attribute reads one job attribute element into job, replacing what the job had for it
// (so a subjob's attribute overrides its job's). atJob is false inside a subjob.
func (d *decoder) attribute(el *xmltree.Element, job *events.Job, sc *scope, atJob bool) {
	path := sc.path + "/" + el.Name
	at := &scope{defs: sc.defs, path: path, reserved: sc.reserved, counts: sc.counts}
	switch el.Name {
	case "executable":
		job.Executable, _ = d.path(el, at)
		d.checkRemoteExecutable(el, job.Executable, path)
	case "directory":
		job.Directory, _ = d.path(el, at)
	case "stdin":
		job.Stdin, _ = d.path(el, at)
	case "arguments":
		job.Arguments = d.stringArray(el, at)
	case "environment":
		job.Environment = d.environment(el, at)
	case "stdout":
		job.Stdout = d.pathArray(el, at, true)
	case "stderr":
		job.Stderr = d.pathArray(el, at, true)
	case "libraryPath":
		job.LibraryPath = d.pathArray(el, at, false)
	case "fileCleanUp":
		job.Cleanup = d.pathArray(el, at, false)
	case "jobType":
		d.jobType(el, job, at)
	case "fileStageIn":
		job.StageIn = d.staging(el, at, "fileInputArray", "fileInput", true)
	case "fileStageOut":
		job.StageOut = d.staging(el, at, "fileOutputArray", "fileOutput", false)
	case "jobStartTime", "jobStartBefore", "jobDuration":
		d.timing(el, job, path)
	case "resourceManagerContact":
		if inner, ok := d.only(el, path, "string"); ok {
			v, _ := d.scalar(inner, &scope{defs: at.defs, path: path + "/string", reserved: at.reserved}, "stringElement")
			coalloc(job).Contact = v
			d.contactHost(el, inner, v, job, path)
		}
	case "jobManagerType":
		if v, ok := d.enumeration(el, path, "fork", "pbs"); ok {
			coalloc(job).JobManager = v
			setRule(&job.Requirements, events.LRMSRule{Is: v, From: origin(el, path)})
		}
	case "count":
		if n, ok := d.integer(el, path); ok {
			job.Count = int(n)
			sc.counts.coalloc, sc.counts.haveCo = n, true
			sc.counts.coLine, sc.counts.coCol = el.Line, el.Col
			job.Requirements.Processors = n
			job.Requirements.SetOrigin("processors", origin(el, path))
		}
	case "resource":
		d.resource(el, job, at)
	case "coallocationPolicy":
		d.coallocationPolicy(el, job, sc, atJob)
	default:
		d.unknown(el, sc.path)
	}
}

func coalloc(job *events.Job) *events.Coallocation {
	if job.Coallocation == nil {
		job.Coallocation = &events.Coallocation{}
	}
	return job.Coallocation
}

// path reads <x><path>scalar</path></x>.
func (d *decoder) path(el *xmltree.Element, sc *scope) (string, bool) {
	inner, ok := d.only(el, sc.path, "path")
	if !ok {
		return "", false
	}
	return d.nonEmptyScalar(inner, sc.sub("path"), "stringElement")
}

func (sc *scope) sub(name string) *scope {
	return &scope{defs: sc.defs, path: sc.path + "/" + name, reserved: sc.reserved, counts: sc.counts}
}

func (d *decoder) nonEmptyScalar(el *xmltree.Element, sc *scope, leaf string) (string, bool) {
	v, ok := d.scalar(el, sc, leaf)
	if ok && v == "" {
		d.list.Add(el.Line, el.Col, sc.path, "must not be empty")
		return "", false
	}
	return v, ok
}

// pathArray reads <pathArray><path/>...</pathArray>; a lone <path> is accepted where
// several destinations are allowed (stdout, stderr).
func (d *decoder) pathArray(el *xmltree.Element, sc *scope, loneOK bool) []string {
	d.plainAttrs(el, sc.path)
	if loneOK && len(el.Children) == 1 && el.Children[0].Name == "path" {
		if v, ok := d.nonEmptyScalar(el.Children[0], sc.sub("path"), "stringElement"); ok {
			return []string{v}
		}
		return nil
	}
	arr, ok := d.only(el, sc.path, "pathArray")
	if !ok {
		return nil
	}
	asc := sc.sub("pathArray")
	var out []string
	for _, p := range d.many(arr, asc.path, "path") {
		if v, ok := d.nonEmptyScalar(p, asc.sub("path"), "stringElement"); ok {
			out = append(out, v)
		}
	}
	if len(out) == 0 && d.list.Empty() {
		d.list.Add(arr.Line, arr.Col, asc.path, "holds no <path>")
	}
	return out
}

func (d *decoder) stringArray(el *xmltree.Element, sc *scope) []string {
	arr, ok := d.only(el, sc.path, "stringArray")
	if !ok {
		return nil
	}
	asc := sc.sub("stringArray")
	out := []string{}
	for _, s := range d.many(arr, asc.path, "string") {
		d.plainAttrs(s, asc.path+"/string")
		if v, ok := d.scalar(s, asc.sub("string"), "stringElement"); ok {
			out = append(out, v)
		}
	}
	return out
}

func (d *decoder) environment(el *xmltree.Element, sc *scope) []events.EnvVar {
	table, ok := d.only(el, sc.path, "hashtable")
	if !ok {
		return nil
	}
	tsc := sc.sub("hashtable")
	var env []events.EnvVar
	seen := map[string]bool{}
	for _, e := range d.many(table, tsc.path, "entry") {
		epath := tsc.path + "/entry"
		d.onlyAttrs(e, epath, "name")
		name, ok := d.requiredAttr(e, epath, "name")
		if !ok {
			continue
		}
		if !shellquote.IsName(name) {
			d.list.Addf(e.Line, e.Col, epath, "%q is not a valid environment variable name (letters, digits, '_', not starting with a digit)", name)
			continue
		}
		if seen[name] {
			d.list.Addf(e.Line, e.Col, epath, "%s is set twice", name)
			continue
		}
		seen[name] = true
		if v, ok := d.scalar(e, tsc.sub("entry["+name+"]"), "stringElement"); ok {
			env = append(env, events.EnvVar{Name: name, Value: v})
		}
	}
	return env
}

// enumeration reads <enumeration><enumerationValue><choice/></enumerationValue></enumeration>.
func (d *decoder) enumeration(el *xmltree.Element, path string, choices ...string) (string, bool) {
	en, ok := d.only(el, path, "enumeration")
	if !ok {
		return "", false
	}
	val, ok := d.only(en, path+"/enumeration", "enumerationValue")
	if !ok {
		return "", false
	}
	vpath := path + "/enumeration/enumerationValue"
	d.plainAttrs(val, vpath)
	d.noText(val, vpath)
	if len(val.Children) != 1 {
		d.list.Addf(val.Line, val.Col, vpath, "must hold exactly one of <%s/>", strings.Join(choices, "/>, <"))
		return "", false
	}
	c := val.Children[0]
	d.noChildren(c, vpath+"/"+c.Name)
	d.plainAttrs(c, vpath+"/"+c.Name)
	for _, choice := range choices {
		if c.Name == choice {
			return choice, true
		}
	}
	d.list.Addf(c.Line, c.Col, vpath+"/"+c.Name, "unknown value (one of <%s/>)", strings.Join(choices, "/>, <"))
	return "", false
}

func (d *decoder) jobType(el *xmltree.Element, job *events.Job, sc *scope) {
	v, ok := d.enumeration(el, sc.path, "single", "xmpi", "htc")
	if !ok {
		return
	}
	job.JobType = events.JobType(v)
	job.MPI = job.JobType == events.JobXMPI
}

// coallocationPolicy reads gridwire's extension <coallocationPolicy> (a job's, not a
// subjob's): <abort/> (the default: a subjob that ends without succeeding ends its
// running siblings) or <continue/> (they run on; they still start together).
func (d *decoder) coallocationPolicy(el *xmltree.Element, job *events.Job, sc *scope, atJob bool) {
	if !atJob {
		d.list.Add(el.Line, el.Col, sc.path+"/"+el.Name, "is a job's attribute: it applies to all of the job's subjobs, so a subjob cannot set it")
		return
	}
	v, ok := d.enumeration(el, sc.path+"/"+el.Name, events.SiblingsAbort, events.SiblingsContinue)
	if !ok {
		return
	}
	coalloc(job).OnSiblingEnd = v
	sc.policy = el
}

// staging reads fileStageIn/Out: pairs of <url> and <path>.
func (d *decoder) staging(el *xmltree.Element, sc *scope, arrayName, itemName string, in bool) []events.FileCopy {
	arr, ok := d.only(el, sc.path, arrayName)
	if !ok {
		return nil
	}
	asc := sc.sub(arrayName)
	var out []events.FileCopy
	for _, item := range d.many(arr, asc.path, itemName) {
		isc := asc.sub(itemName)
		d.plainAttrs(item, isc.path)
		d.noText(item, isc.path)
		var url, local string
		var haveURL, havePath bool
		for _, c := range item.Children {
			switch {
			case c.Name == "url" && !haveURL:
				url, haveURL = d.nonEmptyScalar(c, isc.sub("url"), "urlElement")
				haveURL = true
			case c.Name == "path" && !havePath:
				local, havePath = d.nonEmptyScalar(c, isc.sub("path"), "stringElement")
				havePath = true
			case c.Name == "url" || c.Name == "path":
				d.list.Add(c.Line, c.Col, isc.path+"/"+c.Name, "given twice")
			default:
				d.list.Add(c.Line, c.Col, isc.path+"/"+c.Name, "unknown element (expected <url> and <path>)")
			}
		}
		if !haveURL || !havePath {
			d.list.Add(item.Line, item.Col, isc.path, "needs both <url> and <path>")
			continue
		}
		if in {
			out = append(out, events.FileCopy{From: url, To: local, Directory: strings.HasSuffix(url, "/")})
		} else {
			out = append(out, events.FileCopy{From: local, To: url, Directory: strings.HasSuffix(url, "/")})
		}
	}
	return out
}

// integer reads <x><integer value="N"/></x>.
func (d *decoder) integer(el *xmltree.Element, path string) (int64, bool) {
	in, ok := d.only(el, path, "integer")
	if !ok {
		return 0, false
	}
	ipath := path + "/integer"
	d.onlyAttrs(in, ipath, "value")
	d.noChildren(in, ipath)
	v, ok := d.requiredAttr(in, ipath, "value")
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 32)
	if err != nil || n < 0 {
		d.list.Addf(in.Line, in.Col, ipath, "value %q is not a whole number from 0 to 2147483647", v)
		return 0, false
	}
	return n, true
}
