package events

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Event schemas are versioned: the N of dev.gridwire.job.<name>.vN. A stored event is
// never rewritten, so when a payload's shape changes, the name's version goes up (in
// Name.Version), the change gets an Upcaster from the old version to the new one, and a
// replay fixture of the old shape stays under testdata to prove old histories still fold.
// Decode upcasts every event it reads to the version this build writes, one step at a
// time, so the fold and the services only ever see current payloads.

// Errors of versioned decoding.
var (
	ErrNoUpcaster   = errors.New("events: no upcaster for this event version")
	ErrNewerVersion = errors.New("events: event version newer than this build")
)

// Version is the schema version this build writes for the event name.
func (n Name) Version() int {
	// Every event is at its first version. A schema change bumps its name here and
	// registers an Upcaster in builtinUpcasters from the version before.
	return 1
}

// ParseType splits a CloudEvents type into gridwire's event name and schema version.
// ok is false for a type that is not dev.gridwire.job.<name>.v<N> with N ≥ 0.
func ParseType(t string) (name Name, version int, ok bool) {
	rest, found := strings.CutPrefix(t, TypePrefix)
	if !found {
		return "", 0, false
	}
	i := strings.LastIndex(rest, ".v")
	if i <= 0 {
		return "", 0, false
	}
	v, err := strconv.Atoi(rest[i+2:])
	if err != nil || v < 0 || strconv.Itoa(v) != rest[i+2:] {
		return "", 0, false
	}
	return Name(rest[:i]), v, true
}

// An Upcaster rewrites one event name's payload from version From to From+1. It sees the
// whole event (some upgrades need its time or source) and returns the payload's new
// form; it must be pure, like the fold.
type Upcaster struct {
	Name Name
	From int
	Up   func(e Event) (json.RawMessage, error)
}

type upcastKey struct {
	name Name
	from int
}

// Upcasters is a registry of upcasters keyed by event name and the version they read.
// It is read-only once built.
type Upcasters struct {
	steps map[upcastKey]Upcaster
}

// NewUpcasters builds a registry. Two upcasters for the same name and version, or one
// that reads a version its name does not have below the current one, are refused.
func NewUpcasters(ups ...Upcaster) (*Upcasters, error) {
	r := &Upcasters{steps: map[upcastKey]Upcaster{}}
	for _, u := range ups {
		k := upcastKey{u.Name, u.From}
		switch {
		case !u.Name.Known():
			return nil, fmt.Errorf("%w: upcaster for %q", ErrUnknownEvent, u.Name)
		case u.From < 0 || u.From >= u.Name.Version():
			return nil, fmt.Errorf("events: upcaster for %s v%d: the current version is v%d", u.Name, u.From, u.Name.Version())
		case u.Up == nil:
			return nil, fmt.Errorf("events: upcaster for %s v%d has no function", u.Name, u.From)
		}
		if _, dup := r.steps[k]; dup {
			return nil, fmt.Errorf("events: two upcasters for %s v%d", u.Name, u.From)
		}
		r.steps[k] = u
	}
	return r, nil
}

// Upcast brings an event read at the given version to its name's current version. An
// event already current is returned as it is (the identity path: no copy, no rewrite).
func (r *Upcasters) Upcast(e Event, version int) (Event, error) {
	current := e.Name.Version()
	if version > current {
		return e, fmt.Errorf("%w: %s %s is v%d, this build knows up to v%d", ErrNewerVersion, e.Name, e.ID, version, current)
	}
	for v := version; v < current; v++ {
		u, ok := r.steps[upcastKey{e.Name, v}]
		if !ok {
			return e, fmt.Errorf("%w: %s v%d (event %s)", ErrNoUpcaster, e.Name, v, e.ID)
		}
		data, err := u.Up(e)
		if err != nil {
			return e, fmt.Errorf("upcasting %s %s from v%d: %w", e.Name, e.ID, v, err)
		}
		if !json.Valid(data) {
			return e, fmt.Errorf("upcasting %s %s from v%d: %w: the result is not JSON", e.Name, e.ID, v, ErrBadEvent)
		}
		e.Data = data
	}
	return e, nil
}

// builtinUpcasters are gridwire's own schema changes, applied by Decode. None yet: every
// event is at v1.
var builtinUpcasters = mustUpcasters()

func mustUpcasters(ups ...Upcaster) *Upcasters {
	r, err := NewUpcasters(ups...)
	if err != nil {
		panic(err)
	}
	return r
}

// Decode parses a stored structured-mode CloudEvent of any version this registry can
// bring to the current one, and sets its Hash (of the stored body: upcasting never
// breaks the chain). It does not set Seq or Subject.
func (r *Upcasters) Decode(body []byte) (Event, error) {
	e, version, err := decodeVersioned(body)
	if err != nil {
		return Event{}, err
	}
	e.Hash = HashOf(body)
	return r.Upcast(e, version)
}
