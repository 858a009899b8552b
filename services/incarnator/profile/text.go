package profile

import (
	"fmt"
	"regexp"
	"strings"
)

// Text is parsed template text: literal runs and replacements. Each replacement knows
// the shell context it sits in, found by reading the text as POSIX shell, so a value from
// a job can be placed there as exactly one word whatever the template looks like.
type Text struct {
	Source string
	Segs   []Seg
}

// Seg is a literal run or one replacement.
type Seg struct {
	Lit  string
	Repl *Replacement
}

// Replacement is <NAME> or <NAME/from/to>.
type Replacement struct {
	Name string
	// From and To are set for a two-level replacement. To is already in Go's
	// Regexp.Expand syntax (converted from Java's replacement syntax).
	From   *regexp.Regexp
	To     string
	JavaTo string // To as written
	// Sed is the same replacement as a sed -E script, for values only the target knows;
	// SedErr says why there is none.
	Sed    string
	SedErr error
	Place  Place
	Offset int // byte offset in Source
}

// Place is the shell context of a replacement.
type Place struct {
	Kind   PlaceKind
	Reason string // why a job value may not go here (KindUnsafe)
}

// PlaceKind says how a value is written at a replacement.
type PlaceKind uint8

// Kinds of place.
const (
	PlacePlain  PlaceKind = iota // outside quotes: the value is written as one quoted word
	PlaceDouble                  // inside "...": the quotes are closed around the quoted word
	PlaceSingle                  // inside '...': likewise
	PlaceArith                   // inside $((...)): only an integer may go here
	PlaceUnsafe                  // a comment, here-document, backquotes, ${...}: no job value
)

// ParseText parses template text. It fails on a bad regular expression, on a
// replacement syntax it cannot read, and on text that leaves a quote, substitution or
// here-document open (it would swallow whatever script text follows it).
func ParseText(src string) (*Text, error) {
	t := &Text{Source: src}
	var lit strings.Builder
	var shell strings.Builder // src with each replacement as a NUL, for the lexer
	for i := 0; i < len(src); {
		r, n, err := scanReplacement(src, i)
		if err != nil {
			return t, err
		}
		if r == nil {
			lit.WriteByte(src[i])
			shell.WriteByte(src[i])
			i++
			continue
		}
		if lit.Len() > 0 {
			t.Segs = append(t.Segs, Seg{Lit: lit.String()})
			lit.Reset()
		}
		r.Offset = i
		t.Segs = append(t.Segs, Seg{Repl: r})
		shell.WriteByte(0)
		i += n
	}
	if lit.Len() > 0 {
		t.Segs = append(t.Segs, Seg{Lit: lit.String()})
	}
	places, err := lexPlaces(shell.String())
	if err != nil {
		return t, err
	}
	k := 0
	for _, s := range t.Segs {
		if s.Repl != nil {
			s.Repl.Place = places[k]
			k++
		}
	}
	return t, nil
}

// Names lists the replacement names of the text in order, without repeats.
func (t *Text) Names() []string {
	var out []string
	seen := map[string]bool{}
	for _, s := range t.Segs {
		if s.Repl != nil && !seen[s.Repl.Name] {
			seen[s.Repl.Name] = true
			out = append(out, s.Repl.Name)
		}
	}
	return out
}

func isNameStart(c byte) bool {
	return c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z'
}

func isNameByte(c byte) bool {
	return isNameStart(c) || c >= '0' && c <= '9' || c == ':' || c == '.' || c == '-'
}

// scanReplacement reads a replacement at src[i] if there is one: '<', a name, then '>'
// or "/from/to>" on the same line. Anything else is literal text (shell redirections
// such as "2>&1", "<file" or "< in" never look like one).
func scanReplacement(src string, i int) (*Replacement, int, error) {
	if src[i] != '<' || i+1 >= len(src) || !isNameStart(src[i+1]) {
		return nil, 0, nil
	}
	j := i + 1
	for j < len(src) && isNameByte(src[j]) {
		j++
	}
	name := src[i+1 : j]
	if j < len(src) && src[j] == '>' {
		return &Replacement{Name: name}, j + 1 - i, nil
	}
	if j >= len(src) || src[j] != '/' {
		return nil, 0, nil
	}
	from, k, ok := scanPart(src, j+1, '/')
	if !ok {
		return nil, 0, nil
	}
	to, end, ok := scanPart(src, k+1, '>')
	if !ok {
		return nil, 0, nil
	}
	re, err := CompileJava(from)
	if err != nil {
		return nil, 0, fmt.Errorf("replacement <%s/%s/%s>: %w", name, from, to, err)
	}
	goTo, err := javaReplacement(to, re.NumSubexp())
	if err != nil {
		return nil, 0, fmt.Errorf("replacement <%s/%s/%s>: %w", name, from, to, err)
	}
	sed, sedErr := sedProgram(from, to)
	return &Replacement{Name: name, From: re, To: goTo, JavaTo: to, Sed: sed, SedErr: sedErr}, end + 1 - i, nil
}

// scanPart reads up to an unescaped stop byte on the same line; it returns the part as
// written (escapes kept) and the stop's index.
func scanPart(src string, i int, stop byte) (string, int, bool) {
	for j := i; j < len(src); j++ {
		switch src[j] {
		case '\\':
			j++
		case '\n':
			return "", 0, false
		case stop:
			return src[i:j], j, true
		}
	}
	return "", 0, false
}

// AppendExpand appends the text with each replacement's value to out. Untrusted values
// are written as single shell words for the place they are in; trusted ones as they are.
func (t *Text) AppendExpand(out []byte, lookup func(name string) (Value, error)) ([]byte, error) {
	for _, s := range t.Segs {
		if s.Repl == nil {
			out = append(out, s.Lit...)
			continue
		}
		v, err := lookup(s.Repl.Name)
		if err != nil {
			return out, err
		}
		if out, err = s.Repl.appendValue(out, v); err != nil {
			return out, err
		}
	}
	return out, nil
}

// Value is what a replacement stands for.
type Value struct {
	Text string
	// List, when not nil, is a list of words (ARGUMENTS); each becomes one word.
	List []string
	// Trusted values come from the profile or the operator's config and are written raw.
	Trusted bool
	// Runtime, when set, is the POSIX shell expansion that yields the value on the
	// target ($GW_WORKDIR, $(id -un)); Text is how a plain replacement writes it. A
	// two-level replacement is applied there, to what Runtime yields.
	Runtime string
	// Split marks a run-time value the plain form leaves to field splitting (a list of
	// native IDs); the two-level form is split likewise.
	Split bool
}

// Replacements lists the text's replacements in order.
func (t *Text) Replacements() []*Replacement {
	var out []*Replacement
	for _, s := range t.Segs {
		if s.Repl != nil {
			out = append(out, s.Repl)
		}
	}
	return out
}

func (r *Replacement) apply(s string) string {
	if r.From == nil {
		return s
	}
	return replaceAll(r.From, s, r.To)
}

func (r *Replacement) appendValue(out []byte, v Value) ([]byte, error) {
	if v.Runtime != "" && r.From != nil {
		return r.appendRuntime(out, v)
	}
	if v.List == nil {
		if v.Trusted {
			return append(out, r.apply(v.Text)...), nil
		}
		return r.appendWord(out, r.apply(v.Text))
	}
	if !v.Trusted && r.Place.Kind != PlacePlain {
		return out, &PlacementError{Name: r.Name, Why: "a list of words can only stand outside quotes"}
	}
	for i, w := range v.List {
		if i > 0 {
			out = append(out, ' ')
		}
		if v.Trusted {
			out = append(out, r.apply(w)...)
		} else {
			out = append(out, quote(r.apply(w))...)
		}
	}
	return out, nil
}

// appendRuntime writes a two-level replacement on a run-time value: a command
// substitution that pipes the value, quoted, through the replacement's sed script, itself
// one quoted word. Inside double quotes it stands as it is; outside quotes it is quoted
// (unless the value is a list of words); inside single quotes those are closed around it.
func (r *Replacement) appendRuntime(out []byte, v Value) ([]byte, error) {
	if r.SedErr != nil {
		return out, &PlacementError{Name: r.Name, Why: "a two-level replacement on a value only the target knows runs there with sed, and " + r.SedErr.Error()}
	}
	cmd := `$(printf '%s\n' "` + v.Runtime + `" | sed -E ` + quote(r.Sed) + `)`
	switch r.Place.Kind {
	case PlacePlain:
		if v.Split {
			return append(out, cmd...), nil
		}
		return append(append(append(out, '"'), cmd...), '"'), nil
	case PlaceDouble:
		return append(out, cmd...), nil
	case PlaceSingle:
		return append(append(append(out, `'"`...), cmd...), `"'`...), nil
	}
	where := r.Place.Reason
	if r.Place.Kind == PlaceArith {
		where = "inside $((...))"
	}
	return out, &PlacementError{Name: r.Name, Why: "a run-time value cannot be placed " + where}
}

func (r *Replacement) appendWord(out []byte, s string) ([]byte, error) {
	switch r.Place.Kind {
	case PlacePlain:
		out = append(out, quote(s)...)
	case PlaceDouble:
		out = append(append(append(out, '"'), quote(s)...), '"')
	case PlaceSingle:
		out = append(append(append(out, '\''), quote(s)...), '\'')
	case PlaceArith:
		if !isInteger(s) {
			return out, &PlacementError{Name: r.Name, Value: s, Why: "only an integer may stand inside $((...))"}
		}
		out = append(out, s...)
	default:
		return out, &PlacementError{Name: r.Name, Value: s, Why: "a value from the job cannot be placed " + r.Place.Reason}
	}
	return out, nil
}

func isInteger(s string) bool {
	if strings.HasPrefix(s, "-") {
		s = s[1:]
	}
	if s == "" || len(s) > 18 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// PlacementError is a job value that the template puts where no quoting is safe.
type PlacementError struct {
	Template string
	Name     string
	Value    string
	Why      string
}

func (e *PlacementError) Error() string {
	where := e.Name
	if e.Template != "" {
		where = e.Template + ": " + e.Name
	}
	if e.Value != "" {
		return fmt.Sprintf("%s: value %q: %s", where, clip(e.Value), e.Why)
	}
	return where + ": " + e.Why
}
