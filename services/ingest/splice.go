package ingest

import (
	"bytes"
	"encoding/json"
	"strconv"

	"github.com/gridwire/gridwire/events"
)

// The instances of one task in one group and one collection (dds.Topology.Each) differ
// only in their own names and numbers: the slots below. A stream encodes the first
// instance of each such shape with json.Marshal, with every slot holding a marker,
// and cuts that JSON at the markers; every further instance of the shape is those
// pieces with its own slots' values between them, the bytes json.Marshal would give
// (TestSplicedPayloadIsMarshal). A submitted event carries the whole canonical job,
// about 1.3 KB for a DDS instance, most of it the same for every instance of a task,
// and json.Marshal's reflection over it was the largest cost of a stream after the
// store's own.

// slot is one per-instance value of a DDS instance's job: a string or an int field.
type slot struct {
	s *string
	n *int
	// omitEmpty: the field is left out of the JSON when zero, so an instance with a
	// zero there does not fit a template that has it.
	omitEmpty bool
	// name: a file or variable name, where validateJob refuses control characters.
	name bool
}

// slotsOf appends the slots of j: its IDs, names, paths, indices, command and
// environment values. Everything else of a DDS instance is its shape's.
func slotsOf(j *events.Job, dst []slot) []slot {
	str := func(p *string, omit bool) { dst = append(dst, slot{s: p, omitEmpty: omit}) }
	str(&j.ID, false)
	str(&j.Name, true)
	str(&j.Parent, true)
	dst = append(dst, slot{s: &j.Executable, omitEmpty: true, name: true})
	for i := range j.Arguments {
		str(&j.Arguments[i], false)
	}
	for i := range j.Environment {
		str(&j.Environment[i].Value, false)
	}
	dst = append(dst, slot{n: &j.Original.Index, omitEmpty: true})
	str(&j.Original.Path, true)
	if d := j.DDS; d != nil {
		str(&d.TaskPath, true)
		str(&d.TaskID, true)
		dst = append(dst, slot{n: &d.TaskIndex}, slot{n: &d.CollectionIndex})
		str(&d.CollectionPath, true)
		str(&d.Exe, true)
	}
	if p := j.Requirements.Placement; p != nil {
		str(&p.Together, true)
		dst = append(dst, slot{n: &p.Index})
	}
	return dst
}

func (s slot) zero() bool { return s.s != nil && *s.s == "" || s.n != nil && *s.n == 0 }

// shapeKey names an instance's shape: its task, group and collection.
type shapeKey struct{ task, group, collection string }

func shapeOf(j *events.Job) (shapeKey, bool) {
	if j.DDS == nil || j.Kind != "" {
		return shapeKey{}, false
	}
	return shapeKey{j.DDS.TaskName, j.DDS.GroupName, j.DDS.CollectionName}, true
}

// template is a shape's JSON cut at its slots: pieces[0], slot order[0], pieces[1], ...
type template struct {
	pieces [][]byte
	order  []int // the slot (index into slotsOf) at each cut, in the JSON's order
	// absent marks the slots left out of the JSON (omitempty, and empty in the first
	// instance); an instance fits only with the same slots empty.
	absent []bool
	ok     bool // false: the shape is marshalled instance by instance
}

// shapeTable finds a value by shape: by a scan while there are few shapes (a topology
// has a shape per task entry of its main), by a map beyond. Hashing three strings for
// every instance cost more than the scan.
type shapeTable[T any] struct {
	keys []shapeKey
	vals []T
	m    map[shapeKey]int
}

const shapeScanMax = 16

func (t *shapeTable[T]) get(k shapeKey) (T, bool) {
	if t.m != nil {
		if i, ok := t.m[k]; ok {
			return t.vals[i], true
		}
	} else {
		for i := range t.keys {
			if t.keys[i] == k {
				return t.vals[i], true
			}
		}
	}
	var zero T
	return zero, false
}

func (t *shapeTable[T]) put(k shapeKey, v T) {
	t.keys, t.vals = append(t.keys, k), append(t.vals, v)
	if len(t.keys) > shapeScanMax {
		if t.m == nil {
			t.m = make(map[shapeKey]int, len(t.keys))
			for i, k := range t.keys {
				t.m[k] = i
			}
		}
		t.m[k] = len(t.keys) - 1
	}
}

// splicer encodes the submitted payloads of a stream's instances.
type splicer struct {
	shapes shapeTable[*template]
	slots  []slot // scratch
}

func newSplicer() *splicer { return &splicer{} }

// appendJob appends j as json.Marshal encodes it.
func (sp *splicer) appendJob(b []byte, j *events.Job) ([]byte, error) {
	key, ok := shapeOf(j)
	if !ok {
		return appendMarshal(b, j)
	}
	t, _ := sp.shapes.get(key)
	if t == nil {
		t = newTemplate(j)
		sp.shapes.put(key, t)
		if t.ok {
			// The first instance of the shape checks the cut: spliced and marshalled
			// must be the same bytes, or the shape is marshalled from now on.
			want, err := json.Marshal(j)
			if err != nil {
				return b, err
			}
			got, fits := t.splice(nil, slotsOf(j, sp.slots[:0]))
			if t.ok = fits && bytes.Equal(got, want); !t.ok {
				return append(b, want...), nil
			}
			return append(b, got...), nil
		}
	}
	if t.ok {
		sp.slots = slotsOf(j, sp.slots[:0])
		if out, fits := t.splice(b, sp.slots); fits {
			return out, nil
		}
	}
	return appendMarshal(b, j)
}

func appendMarshal(b []byte, j *events.Job) ([]byte, error) {
	data, err := json.Marshal(j)
	return append(b, data...), err
}

// splice appends the template with the instance's slot values; fits is false (and b
// unchanged) when the instance does not fit: another number of slots, or an
// empty value where the template has one.
func (t *template) splice(b []byte, slots []slot) ([]byte, bool) {
	if len(slots) != len(t.absent) {
		return b, false
	}
	for k, s := range slots {
		if s.omitEmpty && s.zero() != t.absent[k] {
			return b, false
		}
	}
	for k, p := range t.pieces {
		b = append(b, p...)
		if k == len(t.order) {
			break
		}
		s := slots[t.order[k]]
		if s.s != nil {
			b = appendJSONString(b, *s.s)
		} else {
			b = strconv.AppendInt(b, int64(*s.n), 10)
		}
	}
	return b, true
}

// markerBase numbers the int slots' markers: no index of a topology comes near it.
const markerBase = 7_316_000_000_000

// slotCopy copies j deeply enough that writing its slots leaves j as it was.
func slotCopy(j *events.Job) events.Job {
	c := *j
	c.Arguments = append([]string(nil), j.Arguments...)
	c.Environment = append([]events.EnvVar(nil), j.Environment...)
	if j.DDS != nil {
		d := *j.DDS
		c.DDS = &d
	}
	if j.Requirements.Placement != nil {
		p := *j.Requirements.Placement
		c.Requirements.Placement = &p
	}
	return c
}

// newTemplate cuts the JSON of a copy of j whose slots hold markers.
func newTemplate(j *events.Job) *template {
	c := slotCopy(j)
	slots := slotsOf(&c, nil)
	t := &template{absent: make([]bool, len(slots))}
	markers := make([][]byte, len(slots))
	for k, s := range slots {
		if s.omitEmpty && s.zero() {
			t.absent[k] = true
			continue
		}
		if s.s != nil {
			*s.s = "`gw-slot-" + strconv.Itoa(k) + "`"
			markers[k] = []byte(`"` + *s.s + `"`)
		} else {
			*s.n = markerBase + k
			markers[k] = strconv.AppendInt(nil, int64(*s.n), 10)
		}
	}
	data, err := json.Marshal(&c)
	if err != nil {
		return t
	}
	// Where each marker is: exactly once, an int's between a colon and a comma or brace.
	at := make([]int, len(slots))
	for k, m := range markers {
		if t.absent[k] {
			continue
		}
		i := bytes.Index(data, m)
		if i < 0 || bytes.Contains(data[i+len(m):], m) || bytes.Contains(data[:i], m) {
			return t
		}
		if slots[k].n != nil && (i == 0 || data[i-1] != ':' || i+len(m) >= len(data) || data[i+len(m)] != ',' && data[i+len(m)] != '}') {
			return t
		}
		at[k] = i
	}
	for k := range slots {
		if !t.absent[k] {
			t.order = append(t.order, k)
		}
	}
	// In the JSON's order.
	for a := 1; a < len(t.order); a++ {
		for b := a; b > 0 && at[t.order[b]] < at[t.order[b-1]]; b-- {
			t.order[b], t.order[b-1] = t.order[b-1], t.order[b]
		}
	}
	prev := 0
	for _, k := range t.order {
		t.pieces = append(t.pieces, data[prev:at[k]])
		prev = at[k] + len(markers[k])
	}
	t.pieces = append(t.pieces, data[prev:])
	t.ok = true
	return t
}

// appendJSONString appends s quoted as json.Marshal quotes it: a string of printable
// ASCII without quote, backslash or HTML's < > & as it is, any other through
// json.Marshal itself.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s)
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}
