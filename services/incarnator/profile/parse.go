package profile

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Parse reads one profile file. Every problem found is reported, each as an *Error with
// its file:line:col.
func Parse(file string, data []byte) (*Profile, error) {
	root, err := parseTree(file, data)
	if err != nil {
		return nil, err
	}
	p := &parser{}
	prof := p.profile(root)
	return prof, errors.Join(p.errs...)
}

type parser struct{ errs []error }

func (p *parser) fail(pos Pos, field, format string, args ...any) {
	p.errs = append(p.errs, &Error{Pos: pos, Field: field, Msg: fmt.Sprintf(format, args...)})
}

// requiredAttr returns an attribute that must be present and not empty.
func (p *parser) requiredAttr(n *node, name string) string {
	v, ok := n.attr(name)
	if !ok || strings.TrimSpace(v) == "" {
		p.fail(n.pos, n.name+"@"+name, "required attribute is missing")
	}
	return v
}

// leaf returns the text of an element that must have no child elements.
func (p *parser) leaf(n *node) string {
	for _, k := range n.kids {
		p.fail(k.pos, n.name, "unexpected element <%s> in a text element", k.name)
	}
	return n.text.String()
}

// noText reports text in an element that holds only elements.
func (p *parser) noText(n *node) {
	if strings.TrimSpace(n.text.String()) != "" {
		p.fail(n.pos, n.name, "unexpected text %q", clip(strings.TrimSpace(n.text.String())))
	}
}

func (p *parser) profile(n *node) *Profile {
	if n.name != "Profile" {
		p.fail(n.pos, n.name, "root element must be Profile")
		return nil
	}
	p.noText(n)
	prof := &Profile{Name: p.requiredAttr(n, "name"), Pos: n.pos, ExtendsPos: n.pos}
	prof.Extends, _ = n.attr("extends")
	seen := map[string]Pos{}
	once := func(k *node) bool {
		if prev, dup := seen[k.name]; dup {
			p.fail(k.pos, k.name, "given twice (first at line %d)", prev.Line)
			return false
		}
		seen[k.name] = k.pos
		return true
	}
	for _, k := range n.kids {
		switch k.name {
		case "UspaceRoot":
			if once(k) {
				prof.UspaceRoot = strings.TrimSpace(p.leaf(k))
			}
		case "Delimiter":
			if once(k) {
				prof.Delimiter = strings.TrimSpace(p.leaf(k))
			}
		case "Template":
			if t := p.template(k); t != nil {
				prof.Templates = p.addTemplate(prof.Templates, t)
			}
		case "Storage":
			prof.Storages = append(prof.Storages, Storage{
				Name: p.requiredAttr(k, "name"), Template: p.requiredAttr(k, "template"), Pos: k.pos})
			p.noText(k)
		case "Application":
			prof.Applications = append(prof.Applications, p.application(k))
		default:
			p.fail(k.pos, k.name, "unknown element in Profile")
		}
	}
	p.checkNames(prof)
	return prof
}

func (p *parser) addTemplate(ts []*Template, t *Template) []*Template {
	for _, prev := range ts {
		if prev.Name == t.Name {
			p.fail(t.Pos, "Template@name", "template %q is defined twice in this profile (first at line %d)", t.Name, prev.Pos.Line)
			return ts
		}
	}
	return append(ts, t)
}

func (p *parser) checkNames(prof *Profile) {
	seen := map[string]int{}
	for _, s := range prof.Storages {
		if l, dup := seen[s.Name]; dup {
			p.fail(s.Pos, "Storage@name", "storage %q is defined twice (first at line %d)", s.Name, l)
		}
		seen[s.Name] = s.Pos.Line
	}
	seen = map[string]int{}
	for _, a := range prof.Applications {
		if l, dup := seen[a.Name]; dup {
			p.fail(a.Pos, "Application@name", "application %q is defined twice (first at line %d)", a.Name, l)
		}
		seen[a.Name] = a.Pos.Line
	}
}

func (p *parser) template(n *node) *Template {
	p.noText(n)
	name, _ := n.attr("name")
	t := &Template{Name: name, Pos: n.pos}
	for _, k := range n.kids {
		switch k.name {
		case "Description":
			t.Description = strings.TrimSpace(p.leaf(k))
		case "Invocation":
			inv := p.invocation(k)
			if prev := t.Invocation(inv.Name); prev != nil {
				p.fail(inv.Pos, "Invocation@name", "variation %q is defined twice in template %q (first at line %d)", inv.Name, name, prev.Pos.Line)
				continue
			}
			t.Invocations = append(t.Invocations, inv)
		case "Field":
			f := p.field(k)
			if prev := t.Field(f.Name); prev != nil {
				p.fail(f.Pos, "Field@name", "field %q is defined twice in template %q (first at line %d)", f.Name, name, prev.Pos.Line)
				continue
			}
			t.Fields = append(t.Fields, f)
		default:
			p.fail(k.pos, k.name, "unknown element in Template")
		}
	}
	return t
}

func (p *parser) invocation(n *node) *Invocation {
	p.noText(n)
	name, _ := n.attr("name")
	inv := &Invocation{Name: name, Pos: n.pos}
	bodies := 0
	for _, k := range n.kids {
		switch k.name {
		case "Description":
			inv.Description = strings.TrimSpace(p.leaf(k))
		case "Body":
			bodies++
			inv.Body = p.text(k, trimBody(p.leaf(k)))
		case "StaticScript":
			bodies++
			inv.Static = p.static(k)
		default:
			p.fail(k.pos, k.name, "unknown element in Invocation")
		}
	}
	if bodies != 1 {
		p.fail(n.pos, "Invocation", "needs exactly one Body or StaticScript, has %d", bodies)
	}
	return inv
}

func (p *parser) static(n *node) *StaticScript {
	s := &StaticScript{FileName: p.requiredAttr(n, "fileName"), Pos: n.pos, Content: trimBody(p.leaf(n)) + "\n"}
	if strings.ContainsAny(s.FileName, "/\\\x00") || s.FileName == "." || s.FileName == ".." {
		p.fail(n.pos, "StaticScript@fileName", "%q must be a plain file name", s.FileName)
	}
	args, ok := n.attr("arguments")
	if !ok {
		p.fail(n.pos, "StaticScript@arguments", "required attribute is missing")
	}
	s.Arguments = p.text(n, args)
	return s
}

// text parses template text, reporting its errors at the element's position.
func (p *parser) text(n *node, s string) *Text {
	t, err := ParseText(s)
	if err != nil {
		p.fail(n.pos, n.name, "%v", err)
	}
	return t
}

func (p *parser) field(n *node) *Field {
	p.noText(n)
	f := &Field{Name: p.requiredAttr(n, "name"), Settable: true, Pos: n.pos}
	if v, ok := n.attr("isSettable"); ok {
		b, err := strconv.ParseBool(strings.TrimSpace(v))
		if err != nil {
			p.fail(n.pos, "Field@isSettable", "%q is not a boolean", v)
		}
		f.Settable = b
	}
	for _, k := range n.kids {
		switch k.name {
		case "Description":
			f.Description = strings.TrimSpace(p.leaf(k))
		case "Min":
			f.Min = p.number(k)
		case "Max":
			f.Max = p.number(k)
		case "Tag":
			f.Tags = append(f.Tags, Tag{Name: p.requiredAttr(k, "name"), Value: p.leaf(k)})
		case "Default":
			v := p.leaf(k)
			f.Default = &v
		case "Value":
			v := p.leaf(k)
			f.Value = &v
		default:
			p.fail(k.pos, k.name, "unknown element in Field")
		}
	}
	if f.Min != nil && f.Max != nil && *f.Min > *f.Max {
		p.fail(n.pos, "Field", "Min %g is greater than Max %g", *f.Min, *f.Max)
	}
	if f.Default != nil && (f.Min != nil || f.Max != nil) {
		if _, tagged := f.Tag(*f.Default); !tagged {
			d, ok := PlainNumber(*f.Default)
			switch {
			case !ok:
				p.fail(n.pos, "Field/Default", "%q is not a plain decimal number, and field %s has limits%s", *f.Default, f.Name, limits(f))
			case f.Min != nil && d < *f.Min || f.Max != nil && d > *f.Max:
				p.fail(n.pos, "Field/Default", "%q is outside the limits of field %s%s", *f.Default, f.Name, limits(f))
			}
		}
	}
	return f
}

func (p *parser) number(n *node) *float64 {
	s := strings.TrimSpace(p.leaf(n))
	v, ok := PlainNumber(s)
	if !ok {
		p.fail(n.pos, n.name, "%q is not a plain decimal number (digits, an optional sign and fraction)", s)
		return nil
	}
	return &v
}

func (p *parser) application(n *node) Application {
	p.noText(n)
	a := Application{Name: p.requiredAttr(n, "name"), Template: p.requiredAttr(n, "template"), Pos: n.pos}
	var haveName, haveVersion bool
	for _, k := range n.kids {
		switch k.name {
		case "ApplicationName":
			a.AppName, haveName = strings.TrimSpace(p.leaf(k)), true
		case "ApplicationVersion":
			a.AppVersion, haveVersion = strings.TrimSpace(p.leaf(k)), true
		case "Description":
			a.Description = strings.TrimSpace(p.leaf(k))
		default:
			p.fail(k.pos, k.name, "unknown element in Application")
		}
	}
	if !haveName {
		p.fail(n.pos, "ApplicationName", "required element is missing")
	}
	if !haveVersion {
		p.fail(n.pos, "ApplicationVersion", "required element is missing")
	}
	return a
}

// trimBody drops the blank lines and trailing space that CDATA layout leaves around a
// body, so a static script's "#!" is its first bytes.
func trimBody(s string) string {
	s = strings.TrimRight(s, " \t\r\n")
	for {
		i := strings.IndexByte(s, '\n')
		if i < 0 || strings.TrimSpace(s[:i]) != "" {
			return s
		}
		s = s[i+1:]
	}
}

func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}
