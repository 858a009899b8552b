// Package taskdesc reads the v3 task description (specs/004, JSON or YAML) into a
// canonical job. It owns the attribute rules of that language: required and optional
// attributes, types, environment upper-casing, MPI from count, staging against
// default_storage_base, requirements and the software constraint list. Placeholders
// ({taskid}, {queue}, {lrms}) are kept literal and named in Job.Substitutions; the target
// fills them. It does not police URL schemes (the stager does).
package taskdesc

import (
	"github.com/gridwire/gridwire/pkg/shellquote"
	"strconv"
	"strings"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/services/ingest/internal/diag"
	"github.com/gridwire/gridwire/services/ingest/internal/tree"
)

// Version is the schema version this package reads.
const Version = 3

// Placeholders are the substitution names of the v3 description, in the spec's order.
var Placeholders = []string{"taskid", "queue", "lrms"}

// Decode turns a document tree into a job, or reports every problem found.
func Decode(root *tree.Node) (events.Job, []diag.Problem) {
	d := decoder{}
	var job events.Job
	if root.Kind != tree.Object {
		d.list.Addf(root.Line, root.Col, "(document)", "must be an object, not %s", root.Kind)
		return job, d.list.Problems
	}
	d.topLevel(root, &job)
	if !d.list.Empty() {
		return events.Job{}, d.list.Problems
	}
	d.lrmsDefault(&job.Requirements)
	d.stage(&job)
	if !d.list.Empty() {
		return events.Job{}, d.list.Problems
	}
	job.Substitutions = placeholdersUsed(&job)
	return job, nil
}

type decoder struct {
	list diag.List
	// raw staging and stdio, resolved once default_storage_base is known
	inputs, outputs             []fileEntry
	stdin, stdout, stderr       *tree.Node
	base                        *tree.Node
	attempts                    int
	haveVersion, haveExecutable bool
	fork                        *bool // requirements.fork, nil when not given
	forkFrom                    events.Origin
}

// known are the attributes of the description, as a set.
var known = map[string]bool{"version": true, "description": true, "executable": true, "arguments": true,
	"environment": true, "count": true, "input_files": true, "output_files": true, "stdin": true,
	"stdout": true, "stderr": true, "default_storage_base": true, "max_transfer_attempts": true,
	"requirements": true, ExtensionProfile: true}

type fileEntry struct {
	local, remote string
	node          *tree.Node // the value, for positions
	field         string
}

func (d *decoder) topLevel(root *tree.Node, job *events.Job) {
	for _, f := range root.Fields {
		v := f.Value
		if v.Kind == tree.Null && f.Key != "version" && f.Key != "executable" && known[f.Key] {
			continue // null says "not given", as leaving the attribute out does
		}
		switch f.Key {
		case "version":
			d.haveVersion = true
			if n, ok := d.integer(v, "version"); ok && n != Version {
				d.list.Addf(v.Line, v.Col, "version", "is %d, this service reads version %d", n, Version)
			}
		case "description":
			job.Name, _ = d.str(v, "description")
		case "executable":
			d.haveExecutable = true
			job.Executable, _ = d.nonEmpty(v, "executable")
		case "arguments":
			job.Arguments = d.strList(v, "arguments")
		case "environment":
			job.Environment = d.environment(v)
		case "count":
			if n, ok := d.integer(v, "count"); ok {
				d.count(job, n)
			}
		case "input_files":
			d.inputs = d.fileMap(v, "input_files")
		case "output_files":
			d.outputs = d.fileMap(v, "output_files")
		case "stdin":
			d.stdin = d.stringNode(v, "stdin")
		case "stdout":
			d.stdout = d.stringNode(v, "stdout")
		case "stderr":
			d.stderr = d.stringNode(v, "stderr")
		case "default_storage_base":
			d.base = d.stringNode(v, "default_storage_base")
		case "max_transfer_attempts":
			if n, ok := d.integer(v, "max_transfer_attempts"); ok {
				if n < 0 {
					d.list.Add(v.Line, v.Col, "max_transfer_attempts", "must not be negative")
				}
				// v3 counts retries after a failed transfer; the canonical job counts
				// attempts, so 0 (no retry) is one attempt and n retries are n+1.
				d.attempts = n + 1
				job.MaxTransferAttempts = n + 1
			}
		case "requirements":
			job.Requirements = d.requirements(v)
		case ExtensionProfile:
			d.profileExtension(v, job)
		default:
			d.list.Add(f.Line, f.Col, keyName(f.Key), "unknown field")
		}
	}
	if !d.haveVersion {
		d.list.Add(root.Line, root.Col, "version", "missing (this service reads version 3)")
	}
	if !d.haveExecutable {
		d.list.Add(root.Line, root.Col, "executable", "missing")
	}
}

// count sets processors; more than one means an MPI task, any other value does not.
func (d *decoder) count(job *events.Job, n int) {
	job.Count = n
	if n > 1 {
		job.MPI = true
		job.JobType = events.JobMPI
	}
}

func (d *decoder) environment(v *tree.Node) []events.EnvVar {
	if !d.want(v, tree.Object, "environment") {
		return nil
	}
	env := make([]events.EnvVar, 0, len(v.Fields))
	seen := make(map[string]string, len(v.Fields))
	for _, f := range v.Fields {
		field := "environment." + keyName(f.Key)
		name := strings.ToUpper(f.Key)
		if !shellquote.IsName(name) {
			d.list.Add(f.Line, f.Col, field, "is not a valid environment variable name (letters, digits, '_', not starting with a digit)")
			continue
		}
		if prev, dup := seen[name]; dup {
			d.list.Addf(f.Line, f.Col, field, "sets %s, as %q already does (names are upper-cased)", name, prev)
			continue
		}
		seen[name] = f.Key
		if s, ok := d.str(f.Value, field); ok {
			env = append(env, events.EnvVar{Name: name, Value: s})
		}
	}
	return env
}

// keyName is a key as it appears in a field path: as written when it is a plain word,
// quoted otherwise (so an empty or odd key is still visible).
func keyName(k string) string {
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !(c == '_' || c == '-' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return strconv.Quote(k)
		}
	}
	if k == "" {
		return `""`
	}
	return k
}

func (d *decoder) fileMap(v *tree.Node, field string) []fileEntry {
	if !d.want(v, tree.Object, field) {
		return nil
	}
	out := make([]fileEntry, 0, len(v.Fields))
	for _, f := range v.Fields {
		ff := field + "[" + strconv.Quote(f.Key) + "]"
		if f.Key == "" {
			d.list.Add(f.Line, f.Col, ff, "local path is empty")
			continue
		}
		if s, ok := d.nonEmpty(f.Value, ff); ok {
			out = append(out, fileEntry{local: f.Key, remote: s, node: f.Value, field: ff})
		}
	}
	return out
}

// want checks a node's kind and reports a mismatch.
func (d *decoder) want(v *tree.Node, k tree.Kind, field string) bool {
	if v.Kind != k {
		d.list.Addf(v.Line, v.Col, field, "must be %s, not %s", k, v.Kind)
		return false
	}
	return true
}

func (d *decoder) str(v *tree.Node, field string) (string, bool) {
	if v.Plain {
		return v.Raw, true
	}
	if !d.want(v, tree.String, field) {
		return "", false
	}
	return v.Text, true
}

func (d *decoder) nonEmpty(v *tree.Node, field string) (string, bool) {
	s, ok := d.str(v, field)
	if ok && s == "" {
		d.list.Add(v.Line, v.Col, field, "must not be empty")
		return "", false
	}
	return s, ok
}

func (d *decoder) stringNode(v *tree.Node, field string) *tree.Node {
	if _, ok := d.nonEmpty(v, field); !ok {
		return nil
	}
	return v
}

func (d *decoder) strList(v *tree.Node, field string) []string {
	if !d.want(v, tree.Array, field) {
		return nil
	}
	out := make([]string, 0, len(v.Items))
	for i, item := range v.Items {
		if s, ok := d.str(item, field+"["+strconv.Itoa(i)+"]"); ok {
			out = append(out, s)
		}
	}
	return out
}

func (d *decoder) integer(v *tree.Node, field string) (int, bool) {
	n, ok := d.int64(v, field)
	if ok && int64(int32(n)) != n {
		d.list.Add(v.Line, v.Col, field, "is out of range")
		return 0, false
	}
	return int(n), ok
}

func (d *decoder) int64(v *tree.Node, field string) (int64, bool) {
	if !d.want(v, tree.Number, field) {
		return 0, false
	}
	n, err := strconv.ParseInt(v.Text, 10, 64)
	if err != nil {
		if strings.ContainsAny(v.Text, ".eE") {
			d.list.Addf(v.Line, v.Col, field, "must be an integer, not %s", v.Text)
		} else {
			d.list.Add(v.Line, v.Col, field, "is out of range")
		}
		return 0, false
	}
	return n, true
}

func (d *decoder) boolean(v *tree.Node, field string) (bool, bool) {
	if !d.want(v, tree.Bool, field) {
		return false, false
	}
	return v.Text == "true", true
}
