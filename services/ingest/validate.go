package ingest

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"

	"github.com/gridwire/gridwire/events"
)

// nameFields are the canonical fields that name files or shell names on a target:
// besides NUL, no control character is allowed in them (a file name could carry one, but
// only to deceive whoever lists it; a variable name cannot). Arguments and environment
// values may hold any character but NUL: a quoted shell word carries them.
var nameFields = map[string]bool{
	"executable": true, "directory": true, "library_path": true, "stdin": true, "stdout": true,
	"stderr": true, "default_storage_base": true, "stage_in": true, "stage_out": true, "cleanup": true,
	"environment.name": true,
}

// validateJob refuses a job holding a value no target can carry: a NUL byte anywhere (no
// C string, argv entry, environment entry or file name can hold one), or a control
// character in a file or variable name. Every problem is named by its field path. fields
// caches the walk's struct fields per type (nil: none kept). j is only read.
func validateJob(j *events.Job, fields *fieldCache) error {
	if plainJob(j) {
		return nil // the usual job: nothing below can refuse it
	}
	var errs []error
	w := &walker{segs: make([]seg, 0, 16), fields: fields, f: func(w *walker, field, s string) {
		if plain(s) {
			return // no NUL and no control character: nothing below can refuse it
		}
		if i := strings.IndexByte(s, 0); i >= 0 {
			errs = append(errs, fmt.Errorf("%s: holds a NUL byte at offset %d, which no argument, variable or file name can carry", w.path(), i))
			return
		}
		if nameFields[field] {
			if i := strings.IndexFunc(s, isControl); i >= 0 {
				errs = append(errs, fmt.Errorf("%s: holds the control character %q at offset %d, which a file or variable name must not", w.path(), s[i], i))
			}
		}
	}}
	w.walk(reflect.ValueOf(j).Elem(), "") // by pointer: a Job boxed in an interface is a copy of 1 KB
	return errors.Join(errs...)
}

// plainJob reports whether every string of j is printable ASCII (plain), map keys
// included: then validateJob has nothing to refuse, and the reflective walk, which names
// the field of a refused value, is left for the jobs that hold something else. It reads
// each field by name, several times faster than the walk; TestValidateJobReachesEveryString
// plants a NUL in each string a Job can reach, so a field added to a Job and not read
// here fails it.
func plainJob(j *events.Job) bool {
	o := &j.Original
	ok := plain(j.ID) && plain(j.Name) && plain(string(j.Kind)) && plain(j.Parent) && plainAll(j.Children) &&
		plain(j.Submitter) && plain(j.IdempotencyKey) &&
		plain(o.Format) && plain(o.ContentType) && plain(o.File) && plain(o.SHA256) && plain(o.Path) &&
		plain(j.Executable) && plainAll(j.Arguments) && plain(j.Directory) && plainAll(j.LibraryPath) &&
		plain(j.Stdin) && plainAll(j.Stdout) && plainAll(j.Stderr) && plain(string(j.JobType)) &&
		plain(j.DefaultStorageBase) && plainAll(j.Cleanup) && plainAll(j.Substitutions) &&
		plainMap(j.Fields) && plainMap(j.Extra)
	if !ok || j.ChildRange != nil && !plain(j.ChildRange.First) {
		return false
	}
	for _, e := range j.Environment {
		if !plain(e.Name) || !plain(e.Value) {
			return false
		}
	}
	for _, l := range j.Limits {
		if !plain(string(l.Resource)) {
			return false
		}
	}
	for _, list := range [][]events.FileCopy{j.StageIn, j.StageOut} {
		for _, c := range list {
			if !plain(c.From) || !plain(c.To) || !plain(c.When) {
				return false
			}
		}
	}
	if c := j.Coallocation; c != nil && !(plain(c.Contact) && plain(c.JobManager) && plain(c.OnSiblingEnd)) {
		return false
	}
	if a := j.Application; a != nil && !(plain(a.Name) && plain(a.Version) && plain(a.Variation)) {
		return false
	}
	return plainRequirements(&j.Requirements) && (j.DDS == nil || plainDDS(j.DDS))
}

func plainRequirements(r *events.Requirements) bool {
	if !(plain(string(r.LRMSDefault)) && plain(r.Queue) && plain(r.OSName) && plain(r.OSRelease) &&
		plain(r.OSVersion) && plain(r.Platform) && plain(r.CPUInstructionSet)) {
		return false
	}
	for _, list := range [][]events.NameRequirement{r.Hosts, r.Targets} {
		for _, n := range list {
			if !plainOrigin(n.From) {
				return false
			}
			for _, p := range n.AnyOf {
				if !plain(p.Pattern) || !plain(string(p.Syntax)) {
					return false
				}
			}
		}
	}
	for _, l := range r.LRMS {
		if !plain(l.Is) || !plain(l.IsNot) || !plainOrigin(l.From) {
			return false
		}
	}
	for _, s := range r.Software {
		if !plain(s.Name) || !plain(s.Op) || !plain(s.Version) || !plainOrigin(s.From) {
			return false
		}
	}
	for _, a := range r.Attributes {
		if !plain(a.Name) || !plain(a.Pattern) || !plainOrigin(a.From) {
			return false
		}
	}
	if p := r.Placement; p != nil && !(plain(p.Together) && plain(p.Spread) && plainOrigin(p.From)) {
		return false
	}
	for _, u := range r.Unsupported {
		if !plain(u.What) || !plainOrigin(u.From) {
			return false
		}
	}
	for k, o := range r.Origins {
		if !plain(k) || !plainOrigin(o) {
			return false
		}
	}
	return true
}

func plainDDS(d *events.DDSContext) bool {
	if !(plain(d.Topology) && plain(d.TaskPath) && plain(d.TaskID) && plain(d.TaskName) && plain(d.GroupName) &&
		plain(d.CollectionName) && plain(d.CollectionPath) && plain(d.Exe) && plain(d.EnvScript) && plainMap(d.Vars)) {
		return false
	}
	for _, p := range d.Properties {
		if !plain(p.Name) || !plain(p.Access) || !plain(p.Scope) {
			return false
		}
	}
	for _, r := range d.Requirements {
		if !plain(r.Name) || !plain(r.Type) || !plain(r.Value) {
			return false
		}
	}
	for _, t := range d.Triggers {
		if !plain(t.Name) || !plain(t.Condition) || !plain(t.Action) || !plain(t.Arg) {
			return false
		}
	}
	for _, a := range d.Assets {
		if !plain(a.Name) || !plain(a.Type) || !plain(a.Visibility) || !plain(a.Value) {
			return false
		}
	}
	return true
}

func plainOrigin(o events.Origin) bool { return plain(o.Field) }

func plainAll(list []string) bool {
	for _, s := range list {
		if !plain(s) {
			return false
		}
	}
	return true
}

func plainMap(m map[string]string) bool {
	for k, v := range m {
		if !plain(k) || !plain(v) {
			return false
		}
	}
	return true
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f || r >= 0x80 && r < 0xa0 }

// plain reports whether s is printable ASCII: then it holds neither a NUL nor any rune
// isControl names (C1 controls are two bytes, the first >= 0x80), and validateJob's
// checks, a map lookup and two scans, are skipped for the usual value.
func plain(s string) bool {
	for i := 0; i < len(s); i++ {
		if b := s[i]; b < 0x20 || b >= 0x7f {
			return false
		}
	}
	return true
}

// walker calls f with every string below a value (map keys too) and its top-level field
// name ("environment.name" for variable names). The string's path in the job's JSON
// names ("arguments[2]", "environment[0].value") is kept as segments and spelt out only
// when f asks (w.path()), which only a refused value does: every job is walked, so the
// walk itself builds no strings. Byte slices (the original document) are not strings and
// are skipped.
type walker struct {
	segs   []seg
	fields *fieldCache
	f      func(w *walker, field, s string)
}

// seg is one step of a path: a struct field or map value (name), a slice index, or a map
// key (key set).
type seg struct {
	name  string
	index int
	key   bool
	isIdx bool
}

// path spells the current path out.
func (w *walker) path() string {
	var b strings.Builder
	for _, s := range w.segs {
		switch {
		case s.isIdx:
			fmt.Fprintf(&b, "[%d]", s.index)
		case s.key:
			fmt.Fprintf(&b, " key %q", s.name)
		case b.Len() == 0:
			b.WriteString(s.name)
		default:
			b.WriteString("." + s.name)
		}
	}
	return b.String()
}

func (w *walker) walk(v reflect.Value, field string) {
	switch v.Kind() {
	case reflect.String:
		w.f(w, field, v.String())
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			w.walk(v.Elem(), field)
		}
	case reflect.Slice, reflect.Array:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return
		}
		for i := range v.Len() {
			w.segs = append(w.segs, seg{index: i, isIdx: true})
			w.walk(v.Index(i), field)
			w.segs = w.segs[:len(w.segs)-1]
		}
	case reflect.Map:
		iter := v.MapRange()
		for iter.Next() {
			var k string
			if iter.Key().Kind() == reflect.String {
				k = iter.Key().String() // what Sprint gives, without boxing it
			} else {
				k = fmt.Sprint(iter.Key().Interface())
			}
			w.segs = append(w.segs, seg{name: k, key: true})
			w.walk(iter.Key(), field)
			w.segs[len(w.segs)-1] = seg{name: k}
			w.walk(iter.Value(), field)
			w.segs = w.segs[:len(w.segs)-1]
		}
	case reflect.Struct:
		for _, fi := range w.fields.of(v.Type()) {
			if !fi.strings {
				continue // an int, a bool, a time: nothing to check below
			}
			fld := field
			switch {
			case field == "":
				fld = fi.name
			case field == "environment" && fi.name == "name":
				fld = "environment.name"
			}
			w.segs = append(w.segs, seg{name: fi.name})
			w.walk(v.Field(fi.index), fld)
			w.segs = w.segs[:len(w.segs)-1]
		}
	}
}

// fieldInfo is an exported struct field, its JSON name, and whether a string can be
// reached below it by the walk.
type fieldInfo struct {
	index   int
	name    string
	strings bool
}

// holdsStrings reports whether walk can meet a string below a value of type t: a
// string, an interface (anything), or a pointer, slice, array, map or exported struct
// field leading to one. Byte slices and arrays are skipped by walk, and so by this.
// seen breaks cycles (a type met again adds nothing new).
func holdsStrings(t reflect.Type, seen map[reflect.Type]bool) bool {
	if seen[t] {
		return false
	}
	seen[t] = true
	switch t.Kind() {
	case reflect.String, reflect.Interface:
		return true
	case reflect.Pointer:
		return holdsStrings(t.Elem(), seen)
	case reflect.Slice, reflect.Array:
		return t.Elem().Kind() != reflect.Uint8 && holdsStrings(t.Elem(), seen)
	case reflect.Map:
		return holdsStrings(t.Key(), seen) || holdsStrings(t.Elem(), seen)
	case reflect.Struct:
		for i := range t.NumField() {
			if sf := t.Field(i); sf.IsExported() && holdsStrings(sf.Type, seen) {
				return true
			}
		}
	}
	return false
}

// fieldCache keeps each struct type's fields once read: a job's types are walked for
// every job (a third of the walk's time was reading the same tags again). Safe for
// concurrent use; a nil cache reads them every time.
type fieldCache struct{ m sync.Map } // reflect.Type -> []fieldInfo

func (c *fieldCache) of(t reflect.Type) []fieldInfo {
	if c != nil {
		if fs, ok := c.m.Load(t); ok {
			return fs.([]fieldInfo)
		}
	}
	var fs []fieldInfo
	for i := range t.NumField() {
		sf := t.Field(i)
		if !sf.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
		if name == "" || name == "-" {
			name = sf.Name
		}
		fs = append(fs, fieldInfo{i, name, holdsStrings(sf.Type, map[reflect.Type]bool{})})
	}
	if c != nil {
		c.m.Store(t, fs)
	}
	return fs
}
