package profile

import (
	"errors"
	"fmt"
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

// javaToERE translates a Java regular expression into a POSIX ERE and counts its
// groups.
func javaToERE(src string) (string, int, error) {
	var b strings.Builder
	groups, depth := 0, 0
	atom := false // the last thing written is something a quantifier may follow
	afterGroup := false
	for i := 0; i < len(src); i++ {
		c := src[i]
		switch {
		case c == '\\':
			if i+1 >= len(src) {
				return "", 0, errors.New("ends with a lone backslash")
			}
			i++
			if src[i] == 'Q' {
				end := strings.Index(src[i+1:], `\E`)
				lit := src[i+1:]
				if end >= 0 {
					lit = src[i+1 : i+1+end]
					i += end + 2
				} else {
					i = len(src)
				}
				for j := 0; j < len(lit); j++ {
					if err := writeLiteral(&b, lit[j]); err != nil {
						return "", 0, err
					}
				}
				atom = lit != ""
				afterGroup = false
				continue
			}
			if err := writeEscape(&b, src[i]); err != nil {
				return "", 0, err
			}
			atom, afterGroup = true, false
		case c == '[':
			n, err := writeClass(&b, src[i:])
			if err != nil {
				return "", 0, err
			}
			i += n - 1
			atom, afterGroup = true, false
		case c == '(':
			if i+1 < len(src) && src[i+1] == '?' {
				return "", 0, errors.New("(?...) groups and flags have no POSIX counterpart; use a plain group")
			}
			groups++
			depth++
			b.WriteByte('(')
			atom, afterGroup = false, false
		case c == ')':
			if depth == 0 {
				return "", 0, errors.New("unbalanced )")
			}
			depth--
			b.WriteByte(')')
			atom, afterGroup = true, true
		case c == '|':
			return "", 0, errors.New("alternation (|): POSIX takes the longest alternative, Java the first")
		case c == '*' || c == '+' || c == '?' || c == '{':
			n, err := quantifier(src[i:])
			if err != nil {
				return "", 0, err
			}
			if !atom {
				return "", 0, fmt.Errorf("quantifier %q follows nothing", src[i:i+n])
			}
			if afterGroup {
				return "", 0, errors.New("a quantifier on a group may match differently in POSIX and Java")
			}
			if i+n < len(src) && (src[i+n] == '?' || src[i+n] == '+') {
				return "", 0, errors.New("lazy and possessive quantifiers have no POSIX counterpart")
			}
			b.WriteString(src[i : i+n])
			i += n - 1
			atom = false
		case c == '^' || c == '$' || c == '.':
			b.WriteByte(c)
			atom, afterGroup = c == '.', false
		default:
			if err := writeLiteral(&b, c); err != nil {
				return "", 0, err
			}
			atom, afterGroup = true, false
		}
	}
	if depth != 0 {
		return "", 0, errors.New("unclosed (")
	}
	if groups > 9 {
		return "", 0, fmt.Errorf("%d groups; sed refers to nine at most", groups)
	}
	return b.String(), groups, nil
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

// writeClass writes the Java character class at the start of s as a POSIX bracket
// expression and returns its width. POSIX gives ']' '^' and '-' meaning by position, so
// the members are collected and written in an order that keeps each literal: ']' first,
// ranges and other characters, '^' after them, '-' last.
func writeClass(b *strings.Builder, s string) (int, error) {
	i := 1
	neg := false
	if i < len(s) && s[i] == '^' {
		neg = true
		i++
	}
	var chars []byte
	var ranges []string
	for first := true; ; first = false {
		if i >= len(s) {
			return 0, errors.New("unclosed [")
		}
		c := s[i]
		if c == ']' && !first {
			i++
			break
		}
		if c == '\\' {
			if i+1 >= len(s) {
				return 0, errors.New("unclosed [")
			}
			e := s[i+1]
			i += 2
			if body, ok := shorthand[e]; ok {
				ranges = append(ranges, body)
				continue
			}
			if e >= 'a' && e <= 'z' || e >= 'A' && e <= 'Z' || e >= '0' && e <= '9' || e == '\\' {
				return 0, fmt.Errorf(`\%c inside a character class has no POSIX counterpart`, e)
			}
			c = e
		} else {
			i++
		}
		if i+1 < len(s) && s[i] == '-' && s[i+1] != ']' {
			hi := s[i+1]
			if hi == '\\' || hi == '[' {
				return 0, errors.New("a range ending in an escape has no POSIX counterpart")
			}
			if hi < c {
				return 0, fmt.Errorf("range %c-%c is reversed", c, hi)
			}
			ranges = append(ranges, string([]byte{c, '-', hi}))
			i += 2
			continue
		}
		if c == '\n' || c == 0 {
			return 0, errors.New("a newline or NUL cannot stand in a sed pattern")
		}
		chars = append(chars, c)
	}
	b.WriteByte('[')
	if neg {
		b.WriteByte('^')
	}
	var caret, dash bool
	for _, c := range chars {
		if c == ']' {
			b.WriteByte(']')
		}
	}
	b.WriteString(strings.Join(ranges, ""))
	for _, c := range chars {
		switch c {
		case ']':
		case '^':
			caret = true
		case '-':
			dash = true
		default:
			b.WriteByte(c)
		}
	}
	if caret {
		if len(chars) == 1 && len(ranges) == 0 && !neg {
			b.WriteString(`\^`) // "[^]" alone would be a negation: write the literal
			b.WriteString("]")
			return i, nil
		}
		b.WriteByte('^')
	}
	if dash {
		b.WriteByte('-')
	}
	b.WriteByte(']')
	return i, nil
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
