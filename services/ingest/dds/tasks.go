package dds

import (
	"strconv"
	"strings"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/services/ingest/internal/xmltree"
)

func (d *decoder) task(el *xmltree.Element, path string, t *topology) {
	d.attrs(el, path, "name")
	d.noText(el, path)
	name, ok := d.id(el, path, "name")
	// Without <env>, DDS still reads env reachable as its default, true.
	tk := &task{name: name, envReachable: true}
	seen := map[string]bool{}
	for _, c := range el.Children {
		cpath := path + "/" + c.Name
		if seen[c.Name] {
			d.list.Add(c.Line, c.Col, cpath, "given twice")
			continue
		}
		seen[c.Name] = true
		switch c.Name {
		case "exe":
			d.attrs(c, cpath, "reachable")
			tk.exe = d.text(c, cpath)
			tk.rawExe = c.Text
			tk.exeReachable = d.boolean(c, cpath, "reachable", true)
			if tk.exe == "" {
				d.list.Add(c.Line, c.Col, cpath, "is empty")
			} else {
				// A line a shell cannot split (an unterminated quote) is not refused:
				// DDS accepts it and bash fails on it when the task runs, and so it is
				// here (tk.shell below).
				tk.words, tk.badQuote = splitWords(tk.exe)
			}
		case "env":
			d.attrs(c, cpath, "reachable")
			tk.env = d.text(c, cpath)
			tk.rawEnv = c.Text
			tk.envReachable = d.boolean(c, cpath, "reachable", true)
			if tk.env == "" {
				d.list.Add(c.Line, c.Col, cpath, "is empty")
			}
		case "requirements":
			for _, n := range d.names(c, cpath) {
				if r, ok := t.requirements[n.name]; ok {
					tk.requirements = append(tk.requirements, r)
				} else {
					d.list.Addf(n.line, n.col, cpath+"/name", "requirement %s is not declared before this task", n.name)
				}
			}
		case "triggers":
			for _, n := range d.names(c, cpath) {
				if tr, ok := t.triggers[n.name]; ok {
					tk.triggers = append(tk.triggers, tr)
				} else {
					d.list.Addf(n.line, n.col, cpath+"/name", "trigger %s is not declared before this task", n.name)
				}
			}
		case "assets":
			for _, n := range d.names(c, cpath) {
				if a, ok := t.assets[n.name]; ok {
					tk.assets = append(tk.assets, a)
				} else {
					d.list.Addf(n.line, n.col, cpath+"/name", "asset %s is not declared before this task", n.name)
				}
			}
		case "properties":
			d.taskProperties(c, cpath, t, tk)
		default:
			d.list.Add(c.Line, c.Col, cpath, "unknown element")
		}
	}
	if !seen["exe"] {
		d.list.Add(el.Line, el.Col, path, "<exe> is missing")
	}
	if !ok {
		return
	}
	if _, dup := t.tasks[name]; dup {
		d.list.Addf(el.Line, el.Col, path, "task %s is declared twice", name)
		return
	}
	tk.placement = t.placement(tk.requirements)
	tk.maxPerHost, tk.maxFrom = t.maxPerHost(tk.requirements)
	tk.restarts = restarts(tk.triggers)
	tk.shell = tk.env != "" || !tk.exeReachable || tk.badQuote != nil || len(tk.assets) > 0 || strings.ContainsAny(tk.exe, "$`")
	if len(tk.words) > 0 {
		tk.stageIn = tk.deliveries()
	}
	tk.hash = tk.hashString()
	t.tasks[name] = tk
}

func (d *decoder) taskProperties(el *xmltree.Element, path string, t *topology, tk *task) {
	seen := map[string]bool{}
	for _, n := range d.names(el, path, "access") {
		p, ok := t.properties[n.name]
		if !ok {
			d.list.Addf(n.line, n.col, path+"/name", "property %s is not declared before this task", n.name)
			continue
		}
		access := d.oneOf(n.el, path+"/name", "access", false, "readwrite", "read", "write", "readwrite")
		// DDS keeps the first listing of a property (CTopoTask::addProperty inserts into a
		// std::map, which keeps the key it has); a later one is still checked, as DDS
		// reads its access tag before dropping it.
		if seen[n.name] {
			continue
		}
		seen[n.name] = true
		tk.properties = append(tk.properties, events.DDSProperty{Name: p.name, Access: access, Scope: p.scope})
	}
}

// ref is one <name> of a list.
type ref struct {
	name      string
	n         int
	line, col int
	el        *xmltree.Element
}

// names reads a list of <name>ID</name> children; attrs are the attributes a name may
// carry.
func (d *decoder) names(el *xmltree.Element, path string, attrs ...string) []ref {
	d.attrs(el, path)
	d.noText(el, path)
	var out []ref
	for _, c := range el.Children {
		cpath := path + "/" + c.Name
		if c.Name != "name" {
			d.list.Add(c.Line, c.Col, cpath, "unknown element (expected <name>)")
			continue
		}
		d.attrs(c, cpath, attrs...)
		out = append(out, d.ref(c, cpath))
	}
	return out
}

func (d *decoder) ref(c *xmltree.Element, path string) ref {
	v := d.text(c, path)
	if !idPattern.MatchString(v) {
		d.list.Addf(c.Line, c.Col, path, "%q is not a name (1 to 128 of a-z A-Z 0-9 # @ ~ _ -)", v)
	}
	return ref{name: v, n: 1, line: c.Line, col: c.Col, el: c}
}

func (d *decoder) collection(el *xmltree.Element, path string, t *topology) {
	d.attrs(el, path, "name")
	d.noText(el, path)
	name, ok := d.id(el, path, "name")
	col := &collection{name: name}
	haveTasks := false
	for _, c := range el.Children {
		cpath := path + "/" + c.Name
		switch c.Name {
		case "requirements":
			for _, n := range d.names(c, cpath) {
				if r, ok := t.requirements[n.name]; ok {
					col.requirements = append(col.requirements, r)
				} else {
					d.list.Addf(n.line, n.col, cpath+"/name", "requirement %s is not declared before this collection", n.name)
				}
			}
		case "tasks":
			if haveTasks {
				d.list.Add(c.Line, c.Col, cpath, "given twice")
			}
			haveTasks = true
			for _, n := range d.names(c, cpath, "n") {
				n.n = d.factor(n.el, cpath+"/name", "n")
				d.member(t, col, n, cpath+"/name")
			}
		case "task": // the seed spec's form: <task>ID</task> directly in the collection
			d.attrs(c, cpath)
			haveTasks = true
			d.member(t, col, d.ref(c, cpath), cpath)
		default:
			d.list.Add(c.Line, c.Col, cpath, "unknown element")
		}
	}
	if !haveTasks || col.size == 0 && d.list.Empty() {
		d.list.Add(el.Line, el.Col, path, "holds no task")
	}
	if !ok {
		return
	}
	if _, dup := t.collections[name]; dup {
		d.list.Addf(el.Line, el.Col, path, "collection %s is declared twice", name)
		return
	}
	col.placement = t.placement(col.requirements)
	col.maxPerHost, col.maxFrom = t.maxPerHost(col.requirements)
	t.collections[name] = col
}

func (d *decoder) member(t *topology, col *collection, n ref, path string) {
	if _, ok := t.tasks[n.name]; !ok {
		d.list.Addf(n.line, n.col, path, "task %s is not declared before this collection", n.name)
		return
	}
	if col.size+n.n > MaxInstances {
		d.list.Addf(n.line, n.col, path, "the collection holds more than %d tasks", MaxInstances)
		return
	}
	col.size += n.n
	col.entries = append(col.entries, entry{task: n.name, n: n.n})
}

// factor reads a multiplication factor: an unsigned 32-bit integer from 1, default 1.
func (d *decoder) factor(el *xmltree.Element, path, attr string) int {
	v, ok := el.Attr(attr)
	if !ok {
		return 1
	}
	n, err := strconv.ParseUint(v, 10, 32)
	if err != nil || n == 0 {
		d.list.Addf(el.Line, el.Col, path, "%s %q must be a whole number from 1 to 4294967295", attr, v)
		return 1
	}
	return int(n)
}

// restarts is how many times a crashed instance of the task runs again: the largest
// RestartTask argument among its TaskCrashed triggers (the only condition and action
// DDS's schema has).
func restarts(triggers []events.DDSTrigger) int {
	n := 0
	for _, tr := range triggers {
		if tr.Condition != "TaskCrashed" || tr.Action != "RestartTask" {
			continue
		}
		if v, err := strconv.Atoi(tr.Arg); err == nil && v > n {
			n = v
		}
	}
	return n
}
