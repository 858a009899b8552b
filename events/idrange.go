package events

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"

	"github.com/oklog/ulid/v2"
)

// ChildListMax is how many children a parent record lists by ID in its submitted event.
// A parent with more names them as one IDRange instead: a list grows by 29 bytes a
// child, and a million children would not fit in one message of the bus (8 MiB).
const ChildListMax = 10_000

// IDRange is Count consecutive job IDs from First: ULIDs that differ only in their
// last bits, so a parent names any number of children in a few bytes.
type IDRange struct {
	First string `json:"first"`
	Count int    `json:"count"`
}

// NewIDRange makes n consecutive job IDs of this millisecond. Its random part starts
// below 2^79, so adding n never carries into the time.
func NewIDRange(n int) IDRange {
	var id ulid.ULID
	_ = id.SetTime(ulid.Now())
	_, _ = rand.Read(id[6:])
	id[6] &= 0x7f
	return IDRange{First: id.String(), Count: n}
}

// At is the i-th ID of the range, from 0.
func (r IDRange) At(i int) string {
	id, err := ulid.ParseStrict(r.First)
	if err != nil {
		return ""
	}
	lo := binary.BigEndian.Uint64(id[8:])
	hi := binary.BigEndian.Uint64(id[:8])
	sum := lo + uint64(i)
	if sum < lo {
		hi++
	}
	binary.BigEndian.PutUint64(id[8:], sum)
	binary.BigEndian.PutUint64(id[:8], hi)
	return id.String()
}

// AppendText appends the n IDs of the range from the from-th on, each 26 bytes, as At
// spells them: a stream of a million children takes their IDs a window at a time, one
// string per window rather than one per ID.
func (r IDRange) AppendText(dst []byte, from, n int) []byte {
	first := r.At(from)
	id, err := ulid.ParseStrict(first)
	if err != nil {
		return dst
	}
	for range n {
		dst = append(dst, make([]byte, ulid.EncodedSize)...)
		_ = id.MarshalTextTo(dst[len(dst)-ulid.EncodedSize:])
		for k := len(id) - 1; k >= 0; k-- {
			id[k]++
			if id[k] != 0 {
				break
			}
		}
	}
	return dst
}

// IDs lists the range.
func (r IDRange) IDs() []string {
	out := make([]string, r.Count)
	for i := range out {
		out[i] = r.At(i)
	}
	return out
}

// Valid reports whether the range names real job IDs.
func (r IDRange) Valid() error {
	if _, err := ulid.ParseStrict(r.First); err != nil || r.Count < 0 {
		return fmt.Errorf("events: child range %q of %d is not a range of job IDs", r.First, r.Count)
	}
	return nil
}

// ChildIDs lists a parent record's children in order: those of its range, then those
// listed.
func (j *Job) ChildIDs() []string {
	if j.ChildRange == nil {
		return j.Children
	}
	return append(j.ChildRange.IDs(), j.Children...)
}

// NumChildren is how many children a parent record has.
func (j *Job) NumChildren() int {
	n := len(j.Children)
	if j.ChildRange != nil {
		n += j.ChildRange.Count
	}
	return n
}
