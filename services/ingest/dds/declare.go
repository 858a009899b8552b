package dds

import (
	"strconv"
	"strings"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/services/ingest/internal/xmltree"
)

// topology reads the declarations and main, after replacing ${var} everywhere.
func (d *decoder) topology(root *xmltree.Element) *topology {
	t := &topology{vars: map[string]string{}, properties: map[string]property{},
		assets: map[string]events.DDSAsset{}, requirements: map[string]events.DDSRequirement{},
		reqFrom:  map[string]events.Origin{},
		triggers: map[string]events.DDSTrigger{}, tasks: map[string]*task{}, collections: map[string]*collection{}}
	if root.Name != "topology" {
		d.list.Addf(root.Line, root.Col, root.Name, "root element must be <topology>, not <%s>", root.Name)
		return t
	}
	d.attrs(root, "topology", "name")
	t.name, _ = d.id(root, "topology", "name")
	d.noText(root, "topology")
	for _, c := range root.Children {
		if c.Name == "var" {
			d.variable(c, t)
		}
	}
	if len(t.vars) > 0 && !expandVars(root, t.vars) {
		d.list.Addf(root.Line, root.Col, "topology/var", "variables expand the topology past %d bytes", MaxExpandedBytes)
		return t
	}
	var mains []*xmltree.Element
	for _, c := range root.Children {
		path := "topology/" + c.Name + named(c)
		switch c.Name {
		case "var":
		case "property":
			d.property(c, path, t)
		case "asset":
			d.asset(c, path, t)
		case "declrequirement":
			d.requirement(c, path, t)
		case "decltrigger":
			d.trigger(c, path, t)
		case "decltask":
			d.task(c, path, t)
		case "declcollection":
			d.collection(c, path, t)
		case "main":
			mains = append(mains, c)
		default:
			d.list.Add(c.Line, c.Col, path, "unknown element")
		}
	}
	if len(t.tasks) == 0 && d.list.Empty() {
		d.list.Add(root.Line, root.Col, "topology", "declares no <decltask>")
	}
	switch {
	case len(mains) == 0:
		d.list.Add(root.Line, root.Col, "topology", "<main> is missing")
	case len(mains) > 1:
		d.list.Add(mains[1].Line, mains[1].Col, "topology/main", "given twice")
	default:
		d.main(mains[0], t)
	}
	return t
}

// named is "[name]" for an element with a name attribute, to tell siblings apart in
// problem reports.
func named(el *xmltree.Element) string {
	if n, ok := el.Attr("name"); ok {
		return "[" + n + "]"
	}
	return ""
}

func (d *decoder) variable(el *xmltree.Element, t *topology) {
	path := "topology/var" + named(el)
	d.attrs(el, path, "name", "value")
	d.leaf(el, path)
	name, ok := d.id(el, path, "name")
	value, has := el.Attr("value")
	if !has {
		d.list.Add(el.Line, el.Col, path, "attribute value is missing")
	}
	if !ok || !has {
		return
	}
	if _, dup := t.vars[name]; dup {
		d.list.Addf(el.Line, el.Col, path, "variable %s is declared twice", name)
		return
	}
	t.vars[name] = value
}

// expandVars replaces ${name} of declared variables in every attribute value and text
// below root, except the var declarations themselves. Unknown ${...} stay as written
// (they may be meant for the shell). It reports false, having stopped, when the
// replacements would produce more than MaxExpandedBytes.
func expandVars(root *xmltree.Element, vars map[string]string) bool {
	budget := MaxExpandedBytes
	var walk func(el *xmltree.Element) bool
	walk = func(el *xmltree.Element) bool {
		if el.Name == "var" {
			return true
		}
		for i := range el.Attrs {
			el.Attrs[i].Value = replaceVars(el.Attrs[i].Value, vars, &budget)
		}
		el.Text = replaceVars(el.Text, vars, &budget)
		for _, c := range el.Children {
			if budget < 0 || !walk(c) {
				return false
			}
		}
		return budget >= 0
	}
	for _, c := range root.Children {
		if !walk(c) {
			return false
		}
	}
	return true
}

// replaceVars replaces known ${name}s in s, charging what it writes to budget; once the
// budget is spent it stops and returns s unchanged.
func replaceVars(s string, vars map[string]string, budget *int) string {
	if !strings.Contains(s, "${") || *budget < 0 {
		return s
	}
	var b strings.Builder
	for {
		i := strings.Index(s, "${")
		if i < 0 {
			break
		}
		j := strings.IndexByte(s[i:], '}')
		if j < 0 {
			break
		}
		name := s[i+2 : i+j]
		if v, ok := vars[name]; ok {
			if *budget -= len(v); *budget < 0 {
				return s
			}
			b.WriteString(s[:i])
			b.WriteString(v)
		} else {
			b.WriteString(s[:i+j+1])
		}
		s = s[i+j+1:]
	}
	b.WriteString(s)
	return b.String()
}

func (d *decoder) property(el *xmltree.Element, path string, t *topology) {
	d.attrs(el, path, "name", "scope")
	d.leaf(el, path)
	name, ok := d.id(el, path, "name")
	scope := d.oneOf(el, path, "scope", false, "global", "global", "collection")
	if !ok {
		return
	}
	if _, dup := t.properties[name]; dup {
		d.list.Addf(el.Line, el.Col, path, "property %s is declared twice", name)
		return
	}
	t.properties[name] = property{name: name, scope: scope}
}

func (d *decoder) asset(el *xmltree.Element, path string, t *topology) {
	d.attrs(el, path, "name", "type", "visibility", "value")
	d.leaf(el, path)
	name, ok := d.id(el, path, "name")
	a := events.DDSAsset{Name: name,
		Type:       d.oneOf(el, path, "type", true, "", "inline"),
		Visibility: d.oneOf(el, path, "visibility", true, "", "task", "global")}
	a.Value, _ = el.Attr("value")
	if a.Value == "" {
		d.list.Add(el.Line, el.Col, path, "attribute value is missing or empty")
	}
	if !ok {
		return
	}
	if _, dup := t.assets[name]; dup {
		d.list.Addf(el.Line, el.Col, path, "asset %s is declared twice", name)
		return
	}
	t.assets[name] = a
}

func (d *decoder) requirement(el *xmltree.Element, path string, t *topology) {
	d.attrs(el, path, "name", "type", "value")
	d.leaf(el, path)
	name, ok := d.id(el, path, "name")
	r := events.DDSRequirement{Name: name,
		Type: d.oneOf(el, path, "type", true, "", "wnname", "hostname", "groupname", "gpu", "maxinstances", "custom")}
	r.Value, _ = el.Attr("value")
	if r.Value == "" {
		d.list.Add(el.Line, el.Col, path, "attribute value is missing or empty")
	} else if r.Type == "gpu" || r.Type == "maxinstances" {
		if n, err := strconv.ParseUint(r.Value, 10, 32); err != nil || n == 0 {
			d.list.Addf(el.Line, el.Col, path, "value %q of a %s requirement must be a whole number from 1", r.Value, r.Type)
		}
	}
	if !ok {
		return
	}
	if _, dup := t.requirements[name]; dup {
		d.list.Addf(el.Line, el.Col, path, "requirement %s is declared twice", name)
		return
	}
	t.requirements[name] = r
	t.reqFrom[name] = events.Origin{Field: path, Line: el.Line, Col: el.Col}
}

func (d *decoder) trigger(el *xmltree.Element, path string, t *topology) {
	d.attrs(el, path, "name", "condition", "action", "arg")
	d.leaf(el, path)
	name, ok := d.id(el, path, "name")
	tr := events.DDSTrigger{Name: name,
		Condition: d.oneOf(el, path, "condition", true, "", "TaskCrashed"),
		Action:    d.oneOf(el, path, "action", true, "", "RestartTask")}
	tr.Arg, _ = el.Attr("arg")
	if tr.Arg == "" {
		d.list.Add(el.Line, el.Col, path, "attribute arg is missing or empty")
	} else if tr.Action == "RestartTask" {
		if _, err := strconv.ParseUint(tr.Arg, 10, 32); err != nil {
			d.list.Addf(el.Line, el.Col, path, "arg %q of RestartTask must be a number of attempts", tr.Arg)
		}
	}
	if !ok {
		return
	}
	if _, dup := t.triggers[name]; dup {
		d.list.Addf(el.Line, el.Col, path, "trigger %s is declared twice", name)
		return
	}
	t.triggers[name] = tr
}
