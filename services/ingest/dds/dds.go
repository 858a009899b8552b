// Package dds reads GSI DDS topologies (specs/002, and the grown language of DDS's own
// topology.xsd in corpus/dds) and expands them into the task instances DDS would start,
// as canonical jobs: one parent record for the topology, then one job per instance with
// its runtime task path, task and collection indices, %taskIndex%/%collectionIndex%
// resolved in its executable, and the DDS_* environment. It validates every reference
// and uniqueness rule. A task's TaskCrashed → RestartTask n trigger becomes the job's
// Restarts, which the watcher acts on; running the tasks is the other services' work.
package dds

import (
	"regexp"
	"strings"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/services/ingest/internal/diag"
	"github.com/gridwire/gridwire/services/ingest/internal/xmltree"
)

// MaxInstances bounds the task instances one topology may expand into; a larger one is
// refused before anything is expanded. Memory does not bound it: a large topology is
// submitted as a stream (ingest's StreamMin), one window of instances at a time. Time
// does: a topology is one submission, answered once all of it is in the log, and two
// million instances is twice the million BENCHMARKS.md measures. (DDS's own limit is
// its 32-bit counters.)
const MaxInstances = 2_000_000

// MaxExpandedBytes bounds the text ${var} replacement may produce in one topology, so a
// large variable used many times cannot exhaust memory, nor time: at 64 MiB a 78 KB
// topology took 0.2 s to refuse (seconds under the fuzzer), at 1 MiB a few ms. The
// replacement applies to the declarations, before instances multiply them.
const MaxExpandedBytes = 1 << 20

// SessionPlaceholder is the value of DDS_SESSION_ID: the session is the topology's
// parent record, whose ID the JOB script of every child sets (events.VarParentID), so
// the target fills it in (Job.Substitutions names "session", events.RuntimeValues).
const SessionPlaceholder = "{session}"

// LocationPlaceholder is the value of DDS_LOCATION. DDS sets it to its installation on
// the worker; gridwire installs nothing there, so the JOB script fills it on the target
// with the worker's own DDS_LOCATION if the account has one, else the job's working
// directory (Job.Substitutions names "dds_location").
const LocationPlaceholder = "{dds_location}"

var idPattern = regexp.MustCompile(`^[a-zA-Z0-9#@~_-]{1,128}$`)

// topology is a validated declaration part plus the main group.
type topology struct {
	name         string
	vars         map[string]string
	properties   map[string]property
	assets       map[string]events.DDSAsset
	requirements map[string]events.DDSRequirement
	reqFrom      map[string]events.Origin // where each requirement is declared
	triggers     map[string]events.DDSTrigger
	tasks        map[string]*task
	collections  map[string]*collection
	main         group
	mainName     string
}

type property struct {
	name, scope string
}

type task struct {
	name         string
	exe          string
	exeReachable bool
	env          string
	envReachable bool
	requirements []events.DDSRequirement
	placement    events.Requirements // requirements in the gateway's terms
	restarts     int                 // runs after a crash (TaskCrashed → RestartTask n)
	maxPerHost   int                 // a maxinstances requirement's value, 0 for none
	maxFrom      events.Origin
	properties   []events.DDSProperty
	triggers     []events.DDSTrigger
	assets       []events.DDSAsset
	// words is exe split into words once; instances only resolve the index tags.
	words []string
	// shell says the exe line runs through bash (it expands variables, or an env
	// script is sourced first), as DDS runs every task.
	shell    bool
	badQuote error // why exe does not split into words; bash reads it as it is
	// stageIn delivers the files of an unreachable exe and env (reachable="false").
	stageIn []events.FileCopy
	// rawExe and rawEnv are the elements' text untrimmed, as DDS hashes them; hash is
	// hashString(), computed once per task.
	rawExe, rawEnv string
	hash           string
}

// entry is one task entry of a collection, n times (the xsd's <name n="...">).
type entry struct {
	task string
	n    int
}

type collection struct {
	name         string
	requirements []events.DDSRequirement
	placement    events.Requirements
	maxPerHost   int // a maxinstances requirement's value, 0 for none
	maxFrom      events.Origin
	entries      []entry // task entries in order, each counted
	size         int     // task instances in one collection instance
}

// group is main or a group in main: its multiplication factor and members in order.
type group struct {
	name    string
	n       int
	members []member
}

type member struct {
	kind  string // task, collection, group
	name  string
	group *group
}

// Decode validates a <topology> and expands it: a parent record, then every instance.
func Decode(root *xmltree.Element) ([]events.Job, []diag.Problem) {
	t, problems := Prepare(root)
	if problems != nil {
		return nil, problems
	}
	jobs := make([]events.Job, 0, t.Count()+1)
	_ = t.Each(func(j *events.Job) error {
		jobs = append(jobs, *j)
		return nil
	})
	return jobs, nil
}

// Topology is a validated topology, ready to expand.
type Topology struct {
	t     *topology
	total int64
}

// Prepare validates a <topology>: its declarations, every reference, and the number of
// instances it expands to.
func Prepare(root *xmltree.Element) (*Topology, []diag.Problem) {
	d := &decoder{}
	topo := d.topology(root)
	if !d.list.Empty() {
		return nil, d.list.Problems
	}
	total := topo.count()
	if total > MaxInstances {
		d.list.Addf(root.Line, root.Col, "topology", "expands to %d task instances, more than the limit of %d", total, MaxInstances)
		return nil, d.list.Problems
	}
	return &Topology{t: topo, total: total}, nil
}

// Count is how many task instances the topology expands to.
func (t *Topology) Count() int { return int(t.total) }

// Each calls emit with the parent record and then every instance, in DDS's order,
// keeping none of them, and stops at emit's first error. The Job emit is given is
// Each's own, and the next instance overwrites it: emit copies what it keeps. A main that starts no task is
// valid (the schema's main and group hold any number of tasks and collections, none
// included, and DDS's scheduler schedules zero of zero): the session is then the parent
// record alone, which ends as soon as it is decided on.
func (t *Topology) Each(emit func(*events.Job) error) error {
	parent := events.Job{Kind: events.KindGroup, Name: t.t.name,
		DDS: &events.DDSContext{Topology: t.t.name, CollectionIndex: -1, Vars: t.t.vars}}
	if err := emit(&parent); err != nil {
		return err
	}
	return expand(t.t, false, emit)
}

// EachShared is Each with more of every instance Each's own: its DDS context,
// environment, arguments and placement too are overwritten by the next instance, so
// emit must copy deeply what it keeps. A stream of a million instances, which keeps
// none, allocates that much less.
func (t *Topology) EachShared(emit func(*events.Job) error) error {
	parent := events.Job{Kind: events.KindGroup, Name: t.t.name,
		DDS: &events.DDSContext{Topology: t.t.name, CollectionIndex: -1, Vars: t.t.vars}}
	if err := emit(&parent); err != nil {
		return err
	}
	return expand(t.t, true, emit)
}

type decoder struct {
	list diag.List
}

func (d *decoder) id(el *xmltree.Element, path, attr string) (string, bool) {
	v, ok := el.Attr(attr)
	if !ok {
		d.list.Addf(el.Line, el.Col, path, "attribute %s is missing", attr)
		return "", false
	}
	if !idPattern.MatchString(v) {
		d.list.Addf(el.Line, el.Col, path, "%s %q must be 1 to 128 of a-z A-Z 0-9 # @ ~ _ -", attr, v)
		return "", false
	}
	return v, true
}

func (d *decoder) attrs(el *xmltree.Element, path string, allowed ...string) {
	for _, a := range el.Attrs {
		if a.Space == "xmlns" || a.Name == "xmlns" && a.Space == "" || a.Space == "http://www.w3.org/2001/XMLSchema-instance" {
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

func (d *decoder) noText(el *xmltree.Element, path string) {
	if strings.TrimSpace(el.Text) != "" {
		d.list.Add(el.Line, el.Col, path, "holds text where only elements are allowed")
	}
}

func (d *decoder) leaf(el *xmltree.Element, path string) {
	for _, c := range el.Children {
		d.list.Addf(c.Line, c.Col, path+"/"+c.Name, "unknown element (<%s> holds text only)", el.Name)
	}
}

// text reads a text-only element's trimmed content.
func (d *decoder) text(el *xmltree.Element, path string) string {
	d.leaf(el, path)
	return strings.TrimSpace(el.Text)
}

func (d *decoder) boolean(el *xmltree.Element, path, attr string, def bool) bool {
	v, ok := el.Attr(attr)
	if !ok {
		return def
	}
	switch strings.TrimSpace(v) {
	case "true", "1":
		return true
	case "false", "0":
		return false
	}
	d.list.Addf(el.Line, el.Col, path, "%s %q must be true or false", attr, v)
	return def
}

func (d *decoder) oneOf(el *xmltree.Element, path, attr string, required bool, def string, choices ...string) string {
	v, ok := el.Attr(attr)
	if !ok {
		if required {
			d.list.Addf(el.Line, el.Col, path, "attribute %s is missing", attr)
		}
		return def
	}
	for _, c := range choices {
		if v == c {
			return v
		}
	}
	d.list.Addf(el.Line, el.Col, path, "%s %q must be one of %s", attr, v, strings.Join(choices, ", "))
	return def
}

// count returns the number of instances DDS would start.
func (t *topology) count() int64 {
	var total int64
	var visit func(g *group) int64
	visit = func(g *group) int64 {
		var per int64
		for _, m := range g.members {
			switch m.kind {
			case "task":
				per++
			case "collection":
				per += int64(t.collections[m.name].size)
			case "group":
				per += visit(m.group)
			}
			if per > MaxInstances {
				return per
			}
		}
		return per * int64(g.n)
	}
	total = visit(&t.main)
	return total
}
