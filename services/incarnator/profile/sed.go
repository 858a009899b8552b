package profile

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// A two-level replacement on a value that only the target knows (the job's working
// directory, its native ID, the account's name when the config does not give it) is
// applied there, to the value, with `sed -E`. sed speaks POSIX extended regular
// expressions, not Java's, so sedProgram translates the Java pattern and replacement
// and refuses, naming the construct, what POSIX would read differently:
//
//   - alternation (a|b): POSIX takes the longest alternative, Java the first that matches
//   - a quantifier on a group ((ab)*, (a|b)?) and lazy quantifiers (a*?): the same
//   - non-capturing and named groups, flags, \b \B \A \z \p{..} \x.. \u.. \n \r and
//     the other escapes POSIX has no counterpart for
//   - more than nine groups (sed's \1 ... \9), a backslash inside a character class
//
// What is left — literals, '.', character classes (with \d \w \s inside), \d \w \s \D
// \W \S, ^ and $, greedy quantifiers on a single character or class, plain groups —
// matches the same text in both. A value is one line on the target, so Java's '$' before
// a final line terminator never comes into play.

// errSed marks a two-level replacement sed cannot apply as Java would.
var errSed = errors.New("not expressible for sed -E on the target")

// sedProgram translates a Java pattern and replacement into a sed script
// s<d>ERE<d>REPLACEMENT<d>g, with a delimiter <d> that occurs in neither.
func sedProgram(javaFrom, javaTo string) (string, error) {
	ere, groups, err := javaToERE(javaFrom)
	if err != nil {
		return "", fmt.Errorf("%w: pattern %q: %v", errSed, javaFrom, err)
	}
	repl, err := javaToSedReplacement(javaTo, groups)
	if err != nil {
		return "", fmt.Errorf("%w: replacement %q: %v", errSed, javaTo, err)
	}
	for _, d := range "/#,;:@%!~=_<>\"'`\x01" {
		if !strings.ContainsRune(ere, d) && !strings.ContainsRune(repl, d) {
			ds := string(d)
			return "s" + ds + ere + ds + repl + ds + "g", nil
		}
	}
	return "", fmt.Errorf("%w: pattern %q: no delimiter character is free", errSed, javaFrom)
}

const ereSpecial = `.[\()*+?{|^$`

// ereTranslator turns a Java pattern into a POSIX ERE one token at a time.
type ereTranslator struct {
	src           string
	b             strings.Builder
	groups, depth int
	atom          bool // the last token written may take a quantifier
	group         bool // the last token written is a group
}

// javaToERE translates a Java regular expression into a POSIX ERE and counts its
// groups.
func javaToERE(src string) (string, int, error) {
	t := &ereTranslator{src: src}
	for i := 0; i < len(src); {
		n, err := t.token(i)
		if err != nil {
			return "", 0, err
		}
		i += n
	}
	switch {
	case t.depth != 0:
		return "", 0, errors.New("unclosed (")
	case t.groups > 9:
		return "", 0, fmt.Errorf("%d groups; sed refers to nine at most", t.groups)
	}
	return t.b.String(), t.groups, nil
}

// token translates the token at src[i] and returns its width.
func (t *ereTranslator) token(i int) (int, error) {
	c := t.src[i]
	switch {
	case c == '\\':
		return t.escape(i)
	case c == '[':
		n, err := writeClass(&t.b, t.src[i:])
		t.atom, t.group = true, false
		return n, err
	case c == '(':
		if i+1 < len(t.src) && t.src[i+1] == '?' {
			return 0, errors.New("(?...) groups and flags have no POSIX counterpart; use a plain group")
		}
		t.groups++
		t.depth++
		t.b.WriteByte('(')
		t.atom, t.group = false, false
	case c == ')':
		if t.depth == 0 {
			return 0, errors.New("unbalanced )")
		}
		t.depth--
		t.b.WriteByte(')')
		t.atom, t.group = true, true
	case c == '|':
		return 0, errors.New("alternation (|): POSIX takes the longest alternative, Java the first")
	case c == '*' || c == '+' || c == '?' || c == '{':
		return t.quantifier(i)
	case c == '^' || c == '$' || c == '.':
		t.b.WriteByte(c)
		t.atom, t.group = c == '.', false
	default:
		t.atom, t.group = true, false
		return 1, writeLiteral(&t.b, c)
	}
	return 1, nil
}

// escape translates \x at src[i], and \Q...\E quoting.
func (t *ereTranslator) escape(i int) (int, error) {
	if i+1 >= len(t.src) {
		return 0, errors.New("ends with a lone backslash")
	}
	if t.src[i+1] != 'Q' {
		t.atom, t.group = true, false
		return 2, writeEscape(&t.b, t.src[i+1])
	}
	rest := t.src[i+2:]
	lit, width := rest, len(t.src)-i
	if end := strings.Index(rest, `\E`); end >= 0 {
		lit, width = rest[:end], 2+end+2
	}
	for j := 0; j < len(lit); j++ {
		if err := writeLiteral(&t.b, lit[j]); err != nil {
			return 0, err
		}
	}
	t.atom, t.group = lit != "", false
	return width, nil
}

// quantifier writes the quantifier at src[i]: only after a character or class, never
// lazy or possessive.
func (t *ereTranslator) quantifier(i int) (int, error) {
	n, err := quantifier(t.src[i:])
	switch {
	case err != nil:
		return 0, err
	case !t.atom:
		return 0, fmt.Errorf("quantifier %q follows nothing", t.src[i:i+n])
	case t.group:
		return 0, errors.New("a quantifier on a group may match differently in POSIX and Java")
	case i+n < len(t.src) && (t.src[i+n] == '?' || t.src[i+n] == '+'):
		return 0, errors.New("lazy and possessive quantifiers have no POSIX counterpart")
	}
	t.b.WriteString(t.src[i : i+n])
	t.atom = false
	return n, nil
}

// quantifier returns the width of the quantifier at the start of s.
func quantifier(s string) (int, error) {
	if s[0] != '{' {
		return 1, nil
	}
	end := strings.IndexByte(s, '}')
	if end < 0 {
		return 0, errors.New("unclosed {")
	}
	for _, c := range s[1:end] {
		if (c < '0' || c > '9') && c != ',' {
			return 0, fmt.Errorf("bad quantifier %q", s[:end+1])
		}
	}
	return end + 1, nil
}

func writeLiteral(b *strings.Builder, c byte) error {
	switch {
	case c == '\n' || c == 0:
		return errors.New("a newline or NUL cannot stand in a sed pattern")
	case strings.IndexByte(ereSpecial, c) >= 0:
		b.WriteByte('\\')
	}
	b.WriteByte(c)
	return nil
}

// shorthand are the Java classes that have a POSIX bracket-expression body.
var shorthand = map[byte]string{'d': "0-9", 'w': "A-Za-z0-9_", 's': "[:space:]"}

func writeEscape(b *strings.Builder, c byte) error {
	if body, ok := shorthand[c]; ok {
		b.WriteString("[" + body + "]")
		return nil
	}
	if body, ok := shorthand[c+'a'-'A']; ok && c >= 'A' && c <= 'Z' {
		b.WriteString("[^" + body + "]")
		return nil
	}
	switch {
	case c == 't':
		b.WriteByte('\t')
		return nil
	case c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9':
		return fmt.Errorf(`\%c has no POSIX counterpart`, c)
	}
	return writeLiteral(b, c)
}

// class is a parsed Java character class: its single characters and its ranges (a
// shorthand such as \d becomes the range text 0-9).
type class struct {
	neg    bool
	chars  []byte
	ranges []string
}

// writeClass writes the Java character class at the start of s as a POSIX bracket
// expression and returns its width.
func writeClass(b *strings.Builder, s string) (int, error) {
	cl, n, err := parseClass(s)
	if err != nil {
		return 0, err
	}
	cl.write(b)
	return n, nil
}

// parseClass reads the class at the start of s ('[' ... ']') and returns its width.
func parseClass(s string) (class, int, error) {
	var cl class
	i := 1
	if i < len(s) && s[i] == '^' {
		cl.neg = true
		i++
	}
	for first := true; ; first = false {
		if i >= len(s) {
			return cl, 0, errors.New("unclosed [")
		}
		if s[i] == ']' && !first {
			return cl, i + 1, nil
		}
		c, n, shorthandBody, err := classMember(s[i:])
		if err != nil {
			return cl, 0, err
		}
		i += n
		switch {
		case shorthandBody != "":
			cl.ranges = append(cl.ranges, shorthandBody)
		case c == '\n' || c == 0 || i+1 < len(s) && (s[i+1] == '\n' || s[i+1] == 0):
			return cl, 0, errors.New("a newline or NUL cannot stand in a sed pattern")
		case i+1 < len(s) && s[i] == '-' && s[i+1] != ']':
			hi := s[i+1]
			if hi == '\\' || hi == '[' {
				return cl, 0, errors.New("a range ending in an escape has no POSIX counterpart")
			}
			if hi < c {
				return cl, 0, fmt.Errorf("range %c-%c is reversed", c, hi)
			}
			cl.ranges = append(cl.ranges, string([]byte{c, '-', hi}))
			i += 2
		default:
			cl.chars = append(cl.chars, c)
		}
	}
}

// classMember reads one member at the start of s: a character (escaped or not) and its
// width, or a shorthand class's bracket body.
func classMember(s string) (byte, int, string, error) {
	if s[0] != '\\' {
		return s[0], 1, "", nil
	}
	if len(s) < 2 {
		return 0, 0, "", errors.New("unclosed [")
	}
	e := s[1]
	if body, ok := shorthand[e]; ok {
		return 0, 2, body, nil
	}
	if e >= 'a' && e <= 'z' || e >= 'A' && e <= 'Z' || e >= '0' && e <= '9' || e == '\\' {
		return 0, 0, "", fmt.Errorf(`\%c inside a character class has no POSIX counterpart`, e)
	}
	return e, 2, "", nil
}

// write writes the class as a POSIX bracket expression. POSIX gives ']', '^' and '-'
// meaning by position (and reads a backslash as itself), so the members are written in
// an order that keeps each literal: ']' first, ranges and other characters, '^' after
// them, '-' last. A class of '^' alone is written as the escaped character.
func (cl class) write(b *strings.Builder) {
	var body strings.Builder
	caret, dash := false, false
	if slices.Contains(cl.chars, ']') {
		body.WriteByte(']')
	}
	body.WriteString(strings.Join(cl.ranges, ""))
	for _, c := range cl.chars {
		switch c {
		case ']':
		case '^':
			caret = true
		case '-':
			dash = true
		default:
			body.WriteByte(c)
		}
	}
	switch {
	case caret && body.Len() == 0 && !cl.neg && dash:
		body.WriteString("-^")
		caret, dash = false, false
	case caret && body.Len() == 0 && !cl.neg:
		b.WriteString(`\^`)
		return
	}
	b.WriteByte('[')
	if cl.neg {
		b.WriteByte('^')
	}
	b.WriteString(body.String())
	if caret {
		b.WriteByte('^')
	}
	if dash {
		b.WriteByte('-')
	}
	b.WriteByte(']')
}

// javaToSedReplacement translates a Java replacement ($n, ${name}, \x) into sed's
// (\n, & for the whole match, literal \ and & escaped).
func javaToSedReplacement(s string, groups int) (string, error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch c {
		case '\\':
			if i+1 >= len(s) {
				return "", errors.New("ends with a lone backslash")
			}
			i++
			if err := writeSedLiteral(&b, s[i]); err != nil {
				return "", err
			}
		case '$':
			if i+1 >= len(s) || s[i+1] < '0' || s[i+1] > '9' {
				return "", errors.New("only $0 ... $9 refer to groups in sed")
			}
			n := int(s[i+1] - '0')
			if n > groups {
				return "", fmt.Errorf("refers to group %d, the pattern has %d", n, groups)
			}
			i++
			if n == 0 {
				b.WriteByte('&')
			} else {
				b.WriteString(`\` + string(s[i]))
			}
		default:
			if err := writeSedLiteral(&b, c); err != nil {
				return "", err
			}
		}
	}
	return b.String(), nil
}

func writeSedLiteral(b *strings.Builder, c byte) error {
	switch c {
	case '\n', 0:
		return errors.New("a newline or NUL cannot stand in a sed replacement")
	case '\\', '&':
		b.WriteByte('\\')
	}
	b.WriteByte(c)
	return nil
}
