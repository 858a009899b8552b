// Package ptpsubmit reads the attribute list of an Eclipse PTP SUBMIT_JOB command into a
// canonical job. The document is the command's arguments as a JSON list of strings, each
// "key=value" as PTP sends them (AbstractProxyRuntimeSystem.getAttributes plus the
// resource manager's own): jobSubId, execName, execPath, workingDir, progArgs (one per
// argument, in order), env (one "NAME=VALUE" each), jobNumProcs, and the batch
// attributes PTP's SLURM proxy reads, jobNumNodes, jobTimeLimit (minutes) and
// jobPartition. queueId names "cluster/queue" (the PTP endpoint turns its element ID
// into that before handing the list in).
//
// It owns the meaning of those attributes. Attributes it does not act on (debugger
// settings, launchedByPTP, ...) are kept in Job.Extra under their PTP names, so nothing
// is dropped silently; what a debugger launch needs is refused, since gridwire does not
// start debuggers.
package ptpsubmit

import (
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/services/ingest/internal/diag"
	"github.com/gridwire/gridwire/services/ingest/internal/tree"
)

// Attribute names (PTP's JobAttributes and the SLURM proxy's job attributes).
const (
	AttrSubID      = "jobSubId"
	AttrExecName   = "execName"
	AttrExecPath   = "execPath"
	AttrWorkingDir = "workingDir"
	AttrProgArgs   = "progArgs"
	AttrEnv        = "env"
	AttrNumProcs   = "jobNumProcs"
	AttrNumNodes   = "jobNumNodes"
	AttrTimeLimit  = "jobTimeLimit"
	AttrPartition  = "jobPartition"
	AttrQueueID    = "queueId"
	AttrDebug      = "debug"
)

// MaxAttributes bounds the list.
const MaxAttributes = 100000

// NodesField is the profile field jobNumNodes sets (a profile that declares it renders it).
const NodesField = "NODES"

type reader struct {
	list diag.List
	job  events.Job
	seen map[string]bool
}

// Decode turns the attribute list into a job, or reports every problem found, each at
// the position of the attribute.
func Decode(root *tree.Node) (events.Job, []diag.Problem) {
	r := reader{seen: map[string]bool{}}
	if root.Kind != tree.Array {
		r.list.Addf(root.Line, root.Col, "(document)", "must be a list of \"key=value\" strings, not %s", root.Kind)
		return events.Job{}, r.list.Problems
	}
	if len(root.Items) > MaxAttributes {
		r.list.Addf(root.Line, root.Col, "(document)", "has %d attributes, at most %d are read", len(root.Items), MaxAttributes)
		return events.Job{}, r.list.Problems
	}
	for _, it := range root.Items {
		r.attribute(it)
	}
	r.finish(root)
	if !r.list.Empty() {
		return events.Job{}, r.list.Problems
	}
	return r.job, nil
}

func (r *reader) attribute(n *tree.Node) {
	if n.Kind != tree.String {
		r.list.Addf(n.Line, n.Col, "(attribute)", "must be a \"key=value\" string, not %s", n.Kind)
		return
	}
	key, val, ok := strings.Cut(n.Text, "=")
	if !ok || key == "" {
		r.list.Addf(n.Line, n.Col, "(attribute)", "%q is not \"key=value\"", n.Text)
		return
	}
	repeatable := key == AttrProgArgs || key == AttrEnv
	if r.seen[key] && !repeatable {
		r.list.Addf(n.Line, n.Col, key, "given twice")
		return
	}
	r.seen[key] = true
	r.set(n, key, val)
}

func (r *reader) set(n *tree.Node, key, val string) {
	j := &r.job
	switch key {
	case AttrSubID:
		r.extra(key, val)
	case AttrExecName:
		j.Executable = path.Join(j.Executable, val) // execPath may have come first
		r.nonEmpty(n, key, val)
	case AttrExecPath:
		j.Executable = path.Join(val, j.Executable)
	case AttrWorkingDir:
		j.Directory = val
	case AttrProgArgs:
		j.Arguments = append(j.Arguments, val)
	case AttrEnv:
		r.env(n, val)
	case AttrNumProcs:
		j.Count = r.positive(n, key, val)
	case AttrNumNodes:
		if c := r.positive(n, key, val); c > 0 {
			r.field(NodesField, strconv.Itoa(c))
		}
	case AttrTimeLimit:
		if m := r.positive(n, key, val); m > 0 {
			j.Duration = time.Duration(m) * time.Minute
		}
	case AttrPartition:
		j.Requirements.Queue = val
		j.Requirements.SetOrigin("queue", events.Origin{Field: key, Line: n.Line, Col: n.Col})
	case AttrQueueID:
		r.queue(n, val)
	case AttrDebug:
		if val == "true" {
			r.list.Add(n.Line, n.Col, key, "a debug launch needs PTP's debugger, which gridwire does not start")
		}
		r.extra(key, val)
	default:
		r.extra(key, val)
	}
}

func (r *reader) extra(key, val string) {
	if r.job.Extra == nil {
		r.job.Extra = map[string]string{}
	}
	r.job.Extra[key] = val
}

func (r *reader) field(key, val string) {
	if r.job.Fields == nil {
		r.job.Fields = map[string]string{}
	}
	r.job.Fields[key] = val
}

func (r *reader) nonEmpty(n *tree.Node, key, val string) {
	if val == "" {
		r.list.Add(n.Line, n.Col, key, "is empty")
	}
}

func (r *reader) positive(n *tree.Node, key, val string) int {
	c, err := strconv.Atoi(val)
	if err != nil || c < 1 {
		r.list.Addf(n.Line, n.Col, key, "%q is not a positive integer", val)
		return 0
	}
	return c
}

func (r *reader) env(n *tree.Node, val string) {
	name, value, ok := strings.Cut(val, "=")
	if !ok || !validEnvName(name) {
		r.list.Addf(n.Line, n.Col, AttrEnv, "%q is not NAME=VALUE with a shell variable name", val)
		return
	}
	r.job.Environment = append(r.job.Environment, events.EnvVar{Name: name, Value: value})
}

func validEnvName(s string) bool {
	if s == "" || s[0] >= '0' && s[0] <= '9' {
		return false
	}
	for _, c := range s {
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// queue reads "cluster/queue"; the queue name becomes the queue requirement.
func (r *reader) queue(n *tree.Node, val string) {
	cl, q, ok := strings.Cut(val, "/")
	if !ok || cl == "" || !events.ValidRoute(cl) {
		r.list.Addf(n.Line, n.Col, AttrQueueID, "%q is not \"cluster/queue\"", val)
		return
	}
	r.extra("ptp.cluster", cl)
	if q != "" && r.job.Requirements.Queue == "" {
		r.job.Requirements.Queue = q
		r.job.Requirements.SetOrigin("queue", events.Origin{Field: AttrQueueID, Line: n.Line, Col: n.Col})
	}
}

func (r *reader) finish(root *tree.Node) {
	if !r.seen[AttrSubID] {
		r.list.Add(root.Line, root.Col, AttrSubID, "missing: PTP matches the new job to its submission by it")
	}
	if !r.seen[AttrExecName] {
		r.list.Add(root.Line, root.Col, AttrExecName, "missing: nothing to run")
	}
	j := &r.job
	j.Name = path.Base(j.Executable)
	if j.Count > 1 {
		j.MPI, j.JobType = true, events.JobMPI
	}
}
