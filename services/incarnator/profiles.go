package incarnator

import (
	"embed"
	"errors"
	"fmt"
	"os"

	"github.com/gridwire/gridwire/services/incarnator/profile"
)

// builtinProfiles are the profiles shipped with gridwire. deploy/profiles holds the
// operator-facing copy; a test keeps the two identical.
//
//go:embed profiles/*.xml
var builtinProfiles embed.FS

// LoadProfiles loads and validates a profile directory; dir "" means the built-in
// profiles. Beyond the spec's checks it requires of every profile that clusters may
// use (one nothing extends) the fields the executor and watcher read: START's
// NATIVE_ID_PATTERN, GET_JOB_STATUS's STATUS_PATTERN, STATE tags and ABSENT_STATE; and
// that every replacement name is a field of its template or a special field.
func LoadProfiles(dir string) (*profile.Set, error) {
	var set *profile.Set
	var err error
	if dir == "" {
		set, err = profile.LoadFS(builtinProfiles, "profiles", "builtin:profiles")
	} else {
		set, err = profile.LoadFS(os.DirFS(dir), ".", dir)
	}
	if set == nil {
		return nil, err
	}
	errs := []error{err}
	for _, name := range set.Names() {
		if set.Abstract(name) {
			continue
		}
		p, _ := set.Profile(name)
		_, perrs := watchFields(p)
		errs = append(errs, perrs...)
		errs = append(errs, undefinedNames(p)...)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return set, nil
}

// CheckProfiles validates a profile directory and returns every problem, each naming
// file:line:col (for `gridwire profiles check DIR`).
func CheckProfiles(dir string) error {
	_, err := LoadProfiles(dir)
	return err
}

// Canonical states a profile's STATE tags and ABSENT_STATE may name.
const (
	NativeQueued  = "QUEUED"
	NativeRunning = "RUNNING"
	NativeHeld    = "HELD"
	NativeEnded   = "ENDED"
)

// Field names gridwire reads from profiles (fixed values, not replacements).
const (
	fieldNativeID    = "NATIVE_ID_PATTERN" // in START: the native ID is group 1
	fieldStatus      = "STATUS_PATTERN"    // in GET_JOB_STATUS: groups id and state
	fieldState       = "STATE"             // in GET_JOB_STATUS: tags native → canonical
	fieldAbsentState = "ABSENT_STATE"      // in GET_JOB_STATUS
)

// watch is what the executor and watcher need to read a target's output.
type watch struct {
	nativeID string
	status   string
	states   map[string]string
	absent   string
}

func watchFields(p *profile.Profile) (watch, []error) {
	var w watch
	var errs []error
	fail := func(pos profile.Pos, field, format string, args ...any) {
		errs = append(errs, &profile.Error{Pos: pos, Field: field, Msg: fmt.Sprintf(format, args...)})
	}
	fixed := func(tmpl, field string) (*profile.Field, string, bool) {
		t := p.Template(tmpl)
		if t == nil {
			return nil, "", false // CheckRequired reports it
		}
		f := t.Field(field)
		if f == nil {
			fail(t.Pos, tmpl, "profile %q: template %s has no field %s", p.Name, tmpl, field)
			return nil, "", false
		}
		if f.Value == nil && field != fieldState {
			fail(f.Pos, field, "profile %q: needs a fixed <Value>", p.Name)
			return f, "", false
		}
		if f.Value == nil {
			return f, "", true
		}
		return f, *f.Value, true
	}
	if f, v, ok := fixed("START", fieldNativeID); ok {
		if re, err := profile.CompileJava(v); err != nil {
			fail(f.Pos, fieldNativeID, "%v", err)
		} else if re.NumSubexp() < 1 {
			fail(f.Pos, fieldNativeID, "%q has no group for the native ID", v)
		}
		w.nativeID = v
	}
	if f, v, ok := fixed("GET_JOB_STATUS", fieldStatus); ok {
		if re, err := profile.CompileJava(v); err != nil {
			fail(f.Pos, fieldStatus, "%v", err)
		} else if re.SubexpIndex("id") < 0 || re.SubexpIndex("state") < 0 {
			fail(f.Pos, fieldStatus, "%q needs the named groups (?<id>...) and (?<state>...)", v)
		}
		w.status = v
	}
	if f, _, ok := fixed("GET_JOB_STATUS", fieldState); ok {
		w.states = map[string]string{}
		for _, tag := range f.Tags {
			if !canonical(tag.Value) {
				fail(f.Pos, fieldState, "tag %s maps to %q, not QUEUED, RUNNING, HELD or ENDED", tag.Name, tag.Value)
			}
			w.states[tag.Name] = tag.Value
		}
		if len(f.Tags) == 0 {
			fail(f.Pos, fieldState, "needs a Tag for each native state")
		}
	}
	if f, v, ok := fixed("GET_JOB_STATUS", fieldAbsentState); ok {
		if !canonical(v) {
			fail(f.Pos, fieldAbsentState, "%q is not QUEUED, RUNNING, HELD or ENDED", v)
		}
		w.absent = v
	}
	return w, errs
}

func canonical(s string) bool {
	return s == NativeQueued || s == NativeRunning || s == NativeHeld || s == NativeEnded
}

// runtimeReplacements reports each two-level replacement on a value only the target
// knows whose regular expression sed cannot apply there as Java would.
func runtimeReplacements(p *profile.Profile, t *profile.Template, inv *profile.Invocation, txt *profile.Text) []error {
	var errs []error
	for _, r := range txt.Replacements() {
		if r.From == nil || r.SedErr == nil || !runtimeNames[r.Name] || t.Field(r.Name) != nil && t.Field(r.Name).Value != nil {
			continue
		}
		errs = append(errs, &profile.Error{Pos: inv.Pos, Field: "Body", Msg: fmt.Sprintf(
			"template %s variation %q of profile %q: <%s/%s/%s> is applied on the target with sed, and it is %v",
			t.Name, inv.Name, p.Name, r.Name, r.From, r.JavaTo, r.SedErr)})
	}
	return errs
}

// undefinedNames reports each replacement a template uses that neither one of its
// fields nor a special field defines: no job could ever be rendered through it, so it is
// refused when the profile is loaded (and by profiles check), not blamed on every job.
func undefinedNames(p *profile.Profile) []error {
	var errs []error
	for _, t := range p.Templates {
		for _, inv := range t.Invocations {
			var txt *profile.Text
			switch {
			case inv.Body != nil:
				txt = inv.Body
			case inv.Static != nil && inv.Static.Arguments != nil:
				txt = inv.Static.Arguments
			default:
				continue
			}
			for _, n := range txt.Names() {
				if t.Field(n) == nil && !isSpecial(n) {
					errs = append(errs, &profile.Error{Pos: inv.Pos, Field: "Body", Msg: fmt.Sprintf(
						"template %s variation %q of profile %q uses <%s>, which no field of the template and no special field defines",
						t.Name, inv.Name, p.Name, n)})
				}
			}
			errs = append(errs, runtimeReplacements(p, t, inv, txt)...)
		}
	}
	return errs
}
