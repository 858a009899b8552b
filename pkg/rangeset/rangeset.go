// Package rangeset implements the range set notation of the PTP resource-manager proxy
// protocol: a compact text form of a set of unsigned integers ("1-7,34-38,55-57"), where
// ranges may come in any order and may overlap ("1-10,4-12,3" is 1 through 12).
//
// It owns parsing, normalising and printing such sets. It does not know what the numbers
// mean (element IDs, ranks): callers give them meaning.
package rangeset

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Max is the largest value a set may hold. PTP's Java client parses range-set members
// with Integer.parseInt, so anything larger could not be read by it.
const Max = 1<<31 - 1

// MaxText is the longest text Parse accepts: sets are sent inside protocol messages, and
// a bound keeps a hostile peer from making the parser allocate without end.
const MaxText = 1 << 20

// Sentinel errors; Parse wraps them in a *SyntaxError.
var (
	ErrEmpty    = errors.New("rangeset: empty set or empty item")
	ErrSyntax   = errors.New("rangeset: not a number or range")
	ErrRange    = errors.New("rangeset: value out of range")
	ErrReversed = errors.New("rangeset: range ends before it starts")
	ErrTooLong  = errors.New("rangeset: text too long")
)

// SyntaxError says where in the text a set went wrong.
type SyntaxError struct {
	Text   string // the offending item (or a prefix of the text when it is too long)
	Offset int    // byte offset of the item in the whole text
	Err    error  // one of the sentinels above
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("rangeset: at byte %d, %q: %v", e.Offset, e.Text, e.Err)
}

func (e *SyntaxError) Unwrap() error { return e.Err }

// Range is the closed interval [Lo, Hi].
type Range struct{ Lo, Hi uint32 }

// Len is the number of values in the range.
func (r Range) Len() uint64 { return uint64(r.Hi) - uint64(r.Lo) + 1 }

// Set is a set of values kept as sorted, disjoint, non-adjacent ranges. The zero value
// is the empty set.
type Set struct{ rs []Range }

// Of returns the set holding the given values.
func Of(vals ...uint32) Set {
	var s Set
	for _, v := range vals {
		s.Add(v)
	}
	return s
}

// Parse reads the notation: items separated by commas, each a decimal number or two
// joined by a dash. No spaces or other characters are allowed. An empty text is an error
// (the protocol never sends an empty set); use the zero Set for "nothing".
func Parse(text string) (Set, error) {
	if len(text) > MaxText {
		return Set{}, &SyntaxError{Text: text[:32], Offset: MaxText, Err: ErrTooLong}
	}
	var s Set
	if text == "" {
		return s, &SyntaxError{Offset: 0, Err: ErrEmpty}
	}
	off := 0
	for _, item := range strings.Split(text, ",") {
		r, err := parseItem(item)
		if err != nil {
			return Set{}, &SyntaxError{Text: item, Offset: off, Err: err}
		}
		s.AddRange(r.Lo, r.Hi)
		off += len(item) + 1
	}
	return s, nil
}

func parseItem(item string) (Range, error) {
	if item == "" {
		return Range{}, ErrEmpty
	}
	lo, hi, dash := strings.Cut(item, "-")
	a, err := parseValue(lo)
	if err != nil {
		return Range{}, err
	}
	if !dash {
		return Range{a, a}, nil
	}
	b, err := parseValue(hi)
	if err != nil {
		return Range{}, err
	}
	if b < a {
		return Range{}, ErrReversed
	}
	return Range{a, b}, nil
}

func parseValue(v string) (uint32, error) {
	if v == "" {
		return 0, ErrEmpty
	}
	for i := 0; i < len(v); i++ {
		if v[i] < '0' || v[i] > '9' {
			return 0, ErrSyntax
		}
	}
	if len(v) > 10 {
		return 0, ErrRange
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil || n > Max {
		return 0, ErrRange
	}
	return uint32(n), nil
}

// Add puts one value in the set.
func (s *Set) Add(v uint32) { s.AddRange(v, v) }

// AddRange puts [lo, hi] in the set; a reversed range adds nothing.
func (s *Set) AddRange(lo, hi uint32) {
	if hi < lo {
		return
	}
	// First range that ends at or after lo-1 (could merge with [lo, hi]).
	i := sort.Search(len(s.rs), func(i int) bool { return uint64(s.rs[i].Hi)+1 >= uint64(lo) })
	j := i
	for j < len(s.rs) && uint64(s.rs[j].Lo) <= uint64(hi)+1 {
		lo = min(lo, s.rs[j].Lo)
		hi = max(hi, s.rs[j].Hi)
		j++
	}
	if i == j {
		s.rs = append(s.rs, Range{})
		copy(s.rs[i+1:], s.rs[i:])
		s.rs[i] = Range{lo, hi}
		return
	}
	s.rs[i] = Range{lo, hi}
	s.rs = append(s.rs[:i+1], s.rs[j:]...)
}

// Contains reports whether v is in the set.
func (s Set) Contains(v uint32) bool {
	i := sort.Search(len(s.rs), func(i int) bool { return s.rs[i].Hi >= v })
	return i < len(s.rs) && s.rs[i].Lo <= v
}

// Len is the number of values in the set.
func (s Set) Len() uint64 {
	var n uint64
	for _, r := range s.rs {
		n += r.Len()
	}
	return n
}

// Empty reports whether the set holds nothing.
func (s Set) Empty() bool { return len(s.rs) == 0 }

// Ranges returns the normalised ranges, sorted and disjoint. The slice is a copy.
func (s Set) Ranges() []Range { return append([]Range(nil), s.rs...) }

// Each calls f for every value in ascending order until f returns false.
func (s Set) Each(f func(uint32) bool) {
	for _, r := range s.rs {
		for v := uint64(r.Lo); v <= uint64(r.Hi); v++ {
			if !f(uint32(v)) {
				return
			}
		}
	}
}

// String prints the normalised notation ("1-7,34-38,55"); the empty set prints "".
func (s Set) String() string {
	var b strings.Builder
	for i, r := range s.rs {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatUint(uint64(r.Lo), 10))
		if r.Hi != r.Lo {
			b.WriteByte('-')
			b.WriteString(strconv.FormatUint(uint64(r.Hi), 10))
		}
	}
	return b.String()
}

// Equal reports whether two sets hold the same values.
func (s Set) Equal(t Set) bool {
	if len(s.rs) != len(t.rs) {
		return false
	}
	for i := range s.rs {
		if s.rs[i] != t.rs[i] {
			return false
		}
	}
	return true
}
