package profile

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
)

// ErrField marks a field value the template refuses: out of its limits, not a number
// where limits apply, set by a job when the field is not settable, or missing.
var ErrField = errors.New("profile: field value refused")

// FieldError says which field of which template refused which value, and why.
type FieldError struct {
	Template string
	Field    string
	Value    string
	Why      string
}

func (e *FieldError) Error() string {
	if e.Value == "" {
		return fmt.Sprintf("template %s: field %s: %s", e.Template, e.Field, e.Why)
	}
	return fmt.Sprintf("template %s: field %s: value %q %s", e.Template, e.Field, clip(e.Value), e.Why)
}

// Unwrap makes every FieldError an ErrField.
func (e *FieldError) Unwrap() error { return ErrField }

// Sources supply field values, in the order the spec gives them after a fixed value.
type Sources struct {
	// Special returns the context's fields (USER_NAME, WORKING_DIRECTORY,
	// TargetSystemInfo:XXX, SSH:HOST, SSH:PORT, and the gateway's own).
	Special func(name string) (Value, bool)
	// Operator returns values fixed by the operator's config (trusted).
	Operator func(name string) (string, bool)
	// Job returns values the job set for named fields (untrusted).
	Job func(name string) (string, bool)
}

// Resolve finds the value of the replacement name in template t: the field's fixed
// Value; else a special field; else the operator's; else the job's (refused when the
// field is not settable, mapped through the field's tags, checked against Min/Max);
// else the field's Default. Values from the profile (fixed, tag, default) and the
// operator are trusted; the job's are not.
func (t *Template) Resolve(name string, src Sources) (Value, error) {
	f := t.Field(name)
	if f != nil && f.Value != nil {
		return Value{Text: *f.Value, Trusted: true}, nil
	}
	if src.Special != nil {
		if v, ok := src.Special(name); ok {
			return t.check(f, v)
		}
	}
	if src.Operator != nil {
		if v, ok := src.Operator(name); ok {
			// Trusted (written as the operator wrote it), but through the same tags
			// and limits as a job's value.
			return t.limit(f, Value{Text: v, Trusted: true})
		}
	}
	if src.Job != nil {
		if v, ok := src.Job(name); ok {
			if f != nil && !f.Settable {
				return Value{}, &FieldError{Template: t.Name, Field: name, Value: v, Why: "is set by the job, but the field is not settable"}
			}
			return t.check(f, Value{Text: v})
		}
	}
	if f != nil && f.Default != nil {
		if tv, ok := f.Tag(*f.Default); ok {
			return Value{Text: tv, Trusted: true}, nil
		}
		return Value{Text: *f.Default, Trusted: true}, nil
	}
	return Value{}, &FieldError{Template: t.Name, Field: name, Why: "has no value: the job does not set it and the profile gives no default"}
}

// check maps an untrusted value through the field's tags and limits.
func (t *Template) check(f *Field, v Value) (Value, error) {
	if f == nil || v.Trusted || v.List != nil {
		return v, nil
	}
	return t.limit(f, v)
}

// limit maps a value from any source through the field's tags and checks it against
// the field's Min and Max: a tag's value is taken as it is; otherwise, with limits, the
// value must be a plain decimal number (no NaN, Inf, exponent or hexadecimal) within
// them. The value keeps its trust.
func (t *Template) limit(f *Field, v Value) (Value, error) {
	if f == nil || v.List != nil {
		return v, nil
	}
	if tv, ok := f.Tag(v.Text); ok {
		return Value{Text: tv, Trusted: true}, nil
	}
	if f.Min == nil && f.Max == nil {
		return v, nil
	}
	n, ok := PlainNumber(v.Text)
	if !ok {
		return Value{}, &FieldError{Template: t.Name, Field: f.Name, Value: v.Text, Why: "is not a number" + limits(f)}
	}
	if f.Min != nil && n < *f.Min || f.Max != nil && n > *f.Max {
		return Value{}, &FieldError{Template: t.Name, Field: f.Name, Value: v.Text, Why: "is out of range" + limits(f)}
	}
	return v, nil
}

func limits(f *Field) string {
	switch {
	case f.Min != nil && f.Max != nil:
		return fmt.Sprintf(" (limits %g..%g)", *f.Min, *f.Max)
	case f.Min != nil:
		return fmt.Sprintf(" (minimum %g)", *f.Min)
	case f.Max != nil:
		return fmt.Sprintf(" (maximum %g)", *f.Max)
	}
	return ""
}

// ExpandInvocation expands a Body variation of t with values from src. A value a
// template puts where no quoting is safe fails with a *PlacementError naming the
// template.
func (t *Template) ExpandInvocation(inv *Invocation, src Sources, out []byte) ([]byte, error) {
	if inv.Body == nil {
		return out, fmt.Errorf("template %s variation %q is a static script, not a body", t.Name, inv.Name)
	}
	return t.ExpandText(inv.Body, src, out)
}

// ExpandText expands text that belongs to t (a body, or a static script's arguments).
func (t *Template) ExpandText(txt *Text, src Sources, out []byte) ([]byte, error) {
	out, err := txt.AppendExpand(out, func(name string) (Value, error) { return t.Resolve(name, src) })
	var pe *PlacementError
	if errors.As(err, &pe) && pe.Template == "" {
		pe.Template = t.Name
	}
	return out, err
}

var plainNumber = regexp.MustCompile(`^[+-]?[0-9]+(\.[0-9]+)?$`)

// PlainNumber parses a decimal number as written in a profile's Min, Max and Default
// and in values checked against them: digits with an optional sign and fraction. NaN,
// infinities, exponents (1e1) and hexadecimal are not plain numbers, so a value passes
// its limits only as the number the template will put in the script.
func PlainNumber(s string) (float64, bool) {
	if !plainNumber.MatchString(s) {
		return 0, false
	}
	n, err := strconv.ParseFloat(s, 64)
	return n, err == nil
}
