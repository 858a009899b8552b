package rangeset

import (
	"errors"
	"strings"
	"testing"
)

func TestParseDocumentExamples(t *testing.T) {
	cases := []struct{ in, want string }{
		{"1,2,3,4,5,6,7,34,35,36,37,38,41,55,56,57", "1-7,34-38,41,55-57"},
		{"1-7,34-38,55-57", "1-7,34-38,55-57"},
		{"1-10,4-12,3", "1-12"},
		{"57,1,3-4,2", "1-4,57"},
		{"0", "0"},
		{"5-5", "5"},
		{"2147483647", "2147483647"},
		{"9,8,7", "7-9"},
	}
	for _, c := range cases {
		s, err := Parse(c.in)
		if err != nil {
			t.Fatalf("Parse(%q): %v", c.in, err)
		}
		if got := s.String(); got != c.want {
			t.Errorf("Parse(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	s, _ := Parse("1-10,4-12,3")
	if s.Len() != 12 || !s.Contains(1) || !s.Contains(12) || s.Contains(13) || s.Contains(0) {
		t.Errorf("1-10,4-12,3: len %d, membership wrong", s.Len())
	}
}

func TestParseRejects(t *testing.T) {
	cases := []struct {
		in   string
		want error
		off  int
	}{
		{"", ErrEmpty, 0},
		{"1,,2", ErrEmpty, 2},
		{"1, 2", ErrSyntax, 2},
		{"1-", ErrEmpty, 0},
		{"-3", ErrEmpty, 0},
		{"4-2", ErrReversed, 0},
		{"1-2-3", ErrSyntax, 0},
		{"x", ErrSyntax, 0},
		{"2147483648", ErrRange, 0},
		{"99999999999999999999", ErrRange, 0},
		{"+1", ErrSyntax, 0},
		{strings.Repeat("1,", MaxText), ErrTooLong, MaxText},
	}
	for _, c := range cases {
		_, err := Parse(c.in)
		var se *SyntaxError
		if !errors.As(err, &se) || !errors.Is(err, c.want) || se.Offset != c.off {
			t.Errorf("Parse(%.20q) = %v, want %v at %d", c.in, err, c.want, c.off)
		}
	}
}

func TestAddMerges(t *testing.T) {
	var s Set
	s.AddRange(10, 20)
	s.AddRange(30, 40)
	s.Add(21)
	s.AddRange(25, 29)
	if got := s.String(); got != "10-21,25-40" {
		t.Fatalf("got %q", got)
	}
	s.AddRange(0, 100)
	if got := s.String(); got != "0-100" {
		t.Fatalf("got %q", got)
	}
	s.AddRange(5, 1)
	if got := s.String(); got != "0-100" {
		t.Fatalf("reversed range changed the set: %q", got)
	}
	var n int
	Of(3, 1, 2, 9).Each(func(v uint32) bool { n++; return v < 3 })
	if n != 3 {
		t.Fatalf("Each stopped after %d values, want 3", n)
	}
}

func FuzzParse(f *testing.F) {
	for _, seed := range []string{"1-7,34-38,55-57", "1-10,4-12,3", "0", "", "1,,2", "4-2", "2147483647", "1-2147483647,5"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, text string) {
		s, err := Parse(text)
		if err != nil {
			return
		}
		out := s.String()
		again, err := Parse(out)
		if err != nil {
			t.Fatalf("printed form %q of %q does not parse: %v", out, text, err)
		}
		if !again.Equal(s) || again.String() != out {
			t.Fatalf("round trip of %q changed the set: %q -> %q", text, out, again.String())
		}
		rs := s.Ranges()
		for i := range rs {
			if rs[i].Hi < rs[i].Lo || (i > 0 && uint64(rs[i-1].Hi)+1 >= uint64(rs[i].Lo)) {
				t.Fatalf("ranges of %q not normalised: %v", text, rs)
			}
		}
		for _, item := range strings.Split(text, ",") {
			r, _ := parseItem(item)
			if !s.Contains(r.Lo) || !s.Contains(r.Hi) {
				t.Fatalf("%q lost %v", text, r)
			}
		}
	})
}
