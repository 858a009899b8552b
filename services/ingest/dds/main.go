package dds

import (
	"github.com/gridwire/gridwire/services/ingest/internal/xmltree"
)

// main reads <main>: tasks, collections and groups (groups only here).
func (d *decoder) main(el *xmltree.Element, t *topology) {
	path := "topology/main"
	d.attrs(el, path, "name")
	d.noText(el, path)
	t.mainName, _ = d.id(el, path, "name")
	t.main = group{name: t.mainName, n: 1}
	groups := map[string]bool{}
	for _, c := range el.Children {
		cpath := path + "/" + c.Name
		if c.Name == "group" {
			cpath += named(c)
		}
		if c.Name != "group" {
			d.groupMember(c, cpath, t, &t.main)
			continue
		}
		d.attrs(c, cpath, "name", "n")
		d.noText(c, cpath)
		name, ok := d.id(c, cpath, "name")
		if ok && (groups[name] || name == t.mainName) {
			d.list.Addf(c.Line, c.Col, cpath, "group %s is declared twice", name)
		}
		groups[name] = true
		g := &group{name: name, n: d.factor(c, cpath, "n")}
		for _, gc := range c.Children {
			if gc.Name == "group" || gc.Name == "main" {
				d.list.Addf(gc.Line, gc.Col, cpath+"/"+gc.Name, "only main may hold groups")
				continue
			}
			d.groupMember(gc, cpath+"/"+gc.Name, t, g)
		}
		t.main.members = append(t.main.members, member{kind: "group", name: name, group: g})
	}
}

func (d *decoder) groupMember(c *xmltree.Element, path string, t *topology, g *group) {
	switch c.Name {
	case "task":
		d.attrs(c, path)
		r := d.ref(c, path)
		if _, ok := t.tasks[r.name]; !ok {
			d.list.Addf(c.Line, c.Col, path, "task %s is not declared", r.name)
		}
		g.members = append(g.members, member{kind: "task", name: r.name})
	case "collection":
		d.attrs(c, path)
		r := d.ref(c, path)
		if _, ok := t.collections[r.name]; !ok {
			d.list.Addf(c.Line, c.Col, path, "collection %s is not declared", r.name)
		}
		g.members = append(g.members, member{kind: "collection", name: r.name})
	default:
		d.list.Add(c.Line, c.Col, path, "unknown element")
	}
}
