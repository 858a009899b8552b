// Package profile reads GPE OS Profiles (the Intel GPE "OS Profile" format, v0.3): XML
// files that describe a target system to a generic gateway — its job directory root, file
// delimiter, script templates with replacement fields, storages and applications —
// organised in hierarchies through extends. It owns parsing, validation, inheritance and
// the expansion of one template invocation into text with every value placed safely for
// the POSIX shell. Choosing a target and assembling a job's scripts belong to the
// incarnator.
package profile

import (
	"errors"
	"fmt"
)

// ErrInvalid marks a profile file or profile set that cannot be used.
var ErrInvalid = errors.New("profile: invalid profile")

// Error is one problem in a profile file, at a position.
type Error struct {
	Pos   Pos
	Field string // the element or attribute concerned, may be empty
	Msg   string
}

func (e *Error) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("%s: %s", e.Pos, e.Msg)
	}
	return fmt.Sprintf("%s: %s: %s", e.Pos, e.Field, e.Msg)
}

// Unwrap makes every Error an ErrInvalid.
func (e *Error) Unwrap() error { return ErrInvalid }

// Profile is one OS profile as written in its file (before inheritance).
type Profile struct {
	Name       string
	Extends    string
	UspaceRoot string
	Delimiter  string
	// Templates, Storages and Applications in document order.
	Templates    []*Template
	Storages     []Storage
	Applications []Application
	Pos          Pos // of the Profile element
	ExtendsPos   Pos
}

// Template is a named script or path template.
type Template struct {
	Name        string
	Description string
	Invocations []*Invocation
	Fields      []*Field
	Pos         Pos
}

// Invocation is one named variation of a template ("" is the default).
type Invocation struct {
	Name        string
	Description string
	// Body is the template text of a Body variation; for a StaticScript variation it is
	// empty and Static is set.
	Body   *Text
	Static *StaticScript
	Pos    Pos
}

// StaticScript is a script written once to the target's BIN storage and run with
// arguments.
type StaticScript struct {
	FileName  string
	Arguments *Text  // template text of the arguments
	Content   string // written as is
	Pos       Pos
}

// Field controls the value of one replacement of a template.
type Field struct {
	Name        string
	Description string
	Min, Max    *float64
	Tags        []Tag
	Default     *string
	Value       *string // fixed value
	Settable    bool
	Pos         Pos
}

// Tag maps a value equal to its name onto its value.
type Tag struct {
	Name  string
	Value string
}

// Storage is a named file space whose path comes from a template.
type Storage struct {
	Name     string
	Template string
	Pos      Pos
}

// Application is an installed application run through a template.
type Application struct {
	Name        string // identity in the hierarchy
	Template    string
	AppName     string // ApplicationName
	AppVersion  string // ApplicationVersion
	Description string
	Pos         Pos
}

// Template returns the named template.
func (p *Profile) Template(name string) *Template {
	for _, t := range p.Templates {
		if t.Name == name {
			return t
		}
	}
	return nil
}

// Invocation returns the named variation.
func (t *Template) Invocation(name string) *Invocation {
	for _, inv := range t.Invocations {
		if inv.Name == name {
			return inv
		}
	}
	return nil
}

// Field returns the named field definition.
func (t *Template) Field(name string) *Field {
	for _, f := range t.Fields {
		if f.Name == name {
			return f
		}
	}
	return nil
}

// Application returns the application entry with the given ApplicationName and, when
// version is not empty, ApplicationVersion.
func (p *Profile) Application(name, version string) (Application, bool) {
	for _, a := range p.Applications {
		if a.AppName == name && (version == "" || a.AppVersion == version) {
			return a, true
		}
	}
	return Application{}, false
}

// Tag returns the value of the tag named v.
func (f *Field) Tag(v string) (string, bool) {
	for _, t := range f.Tags {
		if t.Name == v {
			return t.Value, true
		}
	}
	return "", false
}
