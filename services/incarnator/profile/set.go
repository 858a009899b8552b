package profile

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"
)

// Required lists the templates the gateway needs on every target (spec §2.5), with the
// variations each must have.
var Required = []struct {
	Template    string
	Invocations []string
}{
	{"START", []string{""}},
	{"JOB_PROLOGUE", []string{""}},
	{"JOB_EPILOGUE", []string{""}},
	{"GET_JOB_STATUS", []string{""}},
	{"HOLD", []string{""}},
	{"RESUME", []string{""}},
	{"ABORT", []string{""}},
	{"DELETE", []string{""}},
	{"LIST", []string{"FILE", "DIR"}},
}

// Set is a loaded, validated profile directory with inheritance resolved.
type Set struct {
	// Hash identifies the set's exact content: sha256 over every file's name and bytes.
	Hash     string
	files    []string
	raw      map[string]*Profile
	resolved map[string]*Profile
	parentOf map[string]bool // names some profile extends
}

// LoadFS reads every *.xml file in dir of fsys as one profile set and validates it.
// display prefixes file names in errors (the directory as the operator wrote it). Every
// problem is reported, each with file:line:col; with an error, the returned set holds
// what could be resolved, for further checks, and must not be used to run jobs.
func LoadFS(fsys fs.FS, dir, display string) (*Set, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) { // the directory as the operator named it, not the fs's "."
			err = pe.Err
		}
		return nil, &fs.PathError{Op: "reading profile directory", Path: display, Err: err}
	}
	s := &Set{raw: map[string]*Profile{}, resolved: map[string]*Profile{}, parentOf: map[string]bool{}}
	h := sha256.New()
	var errs []error
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".xml") {
			continue
		}
		data, err := fs.ReadFile(fsys, path.Join(dir, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("reading profile %s: %w", e.Name(), err)
		}
		fmt.Fprintf(h, "%s\x00%d\x00", e.Name(), len(data))
		h.Write(data)
		file := path.Join(display, e.Name())
		s.files = append(s.files, file)
		p, err := Parse(file, data)
		errs = append(errs, err)
		if p == nil {
			continue
		}
		if prev, dup := s.raw[p.Name]; dup {
			errs = append(errs, &Error{Pos: p.Pos, Field: "Profile@name", Msg: fmt.Sprintf("profile %q is also defined at %s", p.Name, prev.Pos)})
			continue
		}
		s.raw[p.Name] = p
	}
	if len(s.files) == 0 {
		errs = append(errs, fmt.Errorf("%w: %s: no *.xml profile files", ErrInvalid, display))
	}
	s.Hash = "sha256:" + hex.EncodeToString(h.Sum(nil))
	errs = append(errs, s.resolveAll()...)
	errs = append(errs, s.validate()...)
	return s, errors.Join(errs...)
}

// Names returns the profile names in order.
func (s *Set) Names() []string {
	out := make([]string, 0, len(s.resolved))
	for n := range s.resolved {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Files returns the files the set was read from.
func (s *Set) Files() []string { return append([]string(nil), s.files...) }

// Profile returns the named profile with everything it inherits.
func (s *Set) Profile(name string) (*Profile, bool) {
	p, ok := s.resolved[name]
	return p, ok
}

// Abstract reports whether other profiles extend the named one; such a profile is a
// base and need not define the required templates itself.
func (s *Set) Abstract(name string) bool { return s.parentOf[name] }

func (s *Set) resolveAll() []error {
	var errs []error
	seen := map[string]bool{} // a cycle or missing parent shows from every profile below it
	for _, name := range sortedKeys(s.raw) {
		if _, err := s.resolve(name, nil); err != nil && !seen[err.Error()] {
			seen[err.Error()] = true
			errs = append(errs, err)
		}
	}
	return errs
}

// resolve flattens a profile onto its ancestors: a child's templates, storages and
// applications replace the parent's of the same name (whole, not merged), the rest are
// inherited; UspaceRoot and Delimiter are inherited unless the child sets them.
func (s *Set) resolve(name string, chain []*Profile) (*Profile, error) {
	if p, ok := s.resolved[name]; ok {
		return p, nil
	}
	p := s.raw[name]
	for i, c := range chain {
		if c.Name == name {
			return nil, cycleError(chain[i:], p)
		}
	}
	if p.Extends == "" {
		s.resolved[name] = p
		return p, nil
	}
	s.parentOf[p.Extends] = true
	if _, ok := s.raw[p.Extends]; !ok {
		return nil, &Error{Pos: p.ExtendsPos, Field: "Profile@extends", Msg: fmt.Sprintf("profile %q extends %q, which no file in the set defines"+
			" (a profile directory is the whole set: the shipped profiles, deploy/profiles, are in it only if copied there)", p.Name, p.Extends)}
	}
	parent, err := s.resolve(p.Extends, append(chain, p))
	if err != nil {
		return nil, err
	}
	out := merge(parent, p)
	s.resolved[name] = out
	return out, nil
}

func cycleError(cycle []*Profile, back *Profile) error {
	var b strings.Builder
	for _, c := range cycle {
		fmt.Fprintf(&b, "%s (%s) extends ", c.Name, c.ExtendsPos)
	}
	b.WriteString(back.Name)
	return &Error{Pos: back.ExtendsPos, Field: "Profile@extends", Msg: "inheritance cycle: " + b.String()}
}

func merge(parent, child *Profile) *Profile {
	out := *child
	if out.UspaceRoot == "" {
		out.UspaceRoot = parent.UspaceRoot
	}
	if out.Delimiter == "" {
		out.Delimiter = parent.Delimiter
	}
	out.Templates = mergeBy(parent.Templates, child.Templates, func(t *Template) string { return t.Name })
	out.Storages = mergeBy(parent.Storages, child.Storages, func(t Storage) string { return t.Name })
	out.Applications = mergeBy(parent.Applications, child.Applications, func(t Application) string { return t.Name })
	return &out
}

// mergeBy keeps the parent's order, replaces entries the child redefines in place, and
// appends the child's new ones.
func mergeBy[T any](parent, child []T, key func(T) string) []T {
	out := make([]T, 0, len(parent)+len(child))
	idx := map[string]int{}
	for _, p := range parent {
		idx[key(p)] = len(out)
		out = append(out, p)
	}
	for _, c := range child {
		if i, ok := idx[key(c)]; ok {
			out[i] = c
			continue
		}
		out = append(out, c)
	}
	return out
}

// validate checks every resolved profile: references between its parts, and, for
// profiles nothing extends, the required templates.
func (s *Set) validate() []error {
	var errs []error
	for _, name := range s.Names() {
		p := s.resolved[name]
		errs = append(errs, checkRefs(p)...)
		if !s.parentOf[name] {
			errs = append(errs, CheckRequired(p)...)
		}
	}
	return errs
}

func checkRefs(p *Profile) []error {
	var errs []error
	for _, st := range p.Storages {
		if p.Template(st.Template) == nil {
			errs = append(errs, &Error{Pos: st.Pos, Field: "Storage@template", Msg: fmt.Sprintf("storage %q of profile %q names template %q, which the profile does not have", st.Name, p.Name, st.Template)})
		}
	}
	for _, a := range p.Applications {
		if p.Template(a.Template) == nil {
			errs = append(errs, &Error{Pos: a.Pos, Field: "Application@template", Msg: fmt.Sprintf("application %q of profile %q names template %q, which the profile does not have", a.Name, p.Name, a.Template)})
		}
	}
	if usesStatic(p) {
		errs = append(errs, checkTemplate(p, "BIN", []string{"", "STATIC_SCRIPT", "RUN_STATIC_SCRIPT"}, "static scripts need it")...)
	}
	for _, t := range p.Templates {
		for _, inv := range t.Invocations {
			if inv.Static != nil && !StaticRuns(t.Name, inv.Name) {
				errs = append(errs, &Error{Pos: inv.Pos, Field: "StaticScript", Msg: fmt.Sprintf(
					"template %s variation %q of profile %q is a static script, which gridwire runs only as a control script (%s); here it must be a Body",
					t.Name, inv.Name, p.Name, staticPlaces)})
			}
		}
	}
	return errs
}

// staticRuns lists the template variations gridwire runs as scripts of their own, so a
// static script can stand there: the control templates. Every other template is text
// put into a script (the JOB script's prologue, epilogue and application line, a
// storage's path, BIN's own variations), where a static script cannot stand.
var staticRuns = map[string]bool{"START/": true, "ABORT/": true, "HOLD/": true, "RESUME/": true,
	"GET_JOB_STATUS/": true, "DELETE/": true, "LIST/FILE": true, "LIST/DIR": true}

const staticPlaces = "START, ABORT, HOLD, RESUME, GET_JOB_STATUS, DELETE, LIST FILE and DIR"

// StaticRuns reports whether a static script can be the given variation of a template.
func StaticRuns(template, variation string) bool { return staticRuns[template+"/"+variation] }

// CheckRequired reports each required template or variation the profile lacks.
func CheckRequired(p *Profile) []error {
	var errs []error
	for _, r := range Required {
		errs = append(errs, checkTemplate(p, r.Template, r.Invocations, "required by the gateway (spec 2.5)")...)
	}
	return errs
}

func checkTemplate(p *Profile, name string, variations []string, why string) []error {
	t := p.Template(name)
	if t == nil {
		return []error{&Error{Pos: p.Pos, Field: "Template", Msg: fmt.Sprintf("profile %q has no template %s (%s)", p.Name, name, why)}}
	}
	var errs []error
	for _, v := range variations {
		if t.Invocation(v) == nil {
			errs = append(errs, &Error{Pos: t.Pos, Field: "Invocation", Msg: fmt.Sprintf("template %s of profile %q has no %q variation (%s)", name, p.Name, v, why)})
		}
	}
	return errs
}

func usesStatic(p *Profile) bool {
	for _, t := range p.Templates {
		for _, inv := range t.Invocations {
			if inv.Static != nil {
				return true
			}
		}
	}
	return false
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
