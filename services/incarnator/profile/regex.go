package profile

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// The spec's two-level replacements, and the patterns profiles use to read native IDs
// and states, are Java regular expressions. gridwire runs them with Go's RE2, which
// guarantees linear time and therefore leaves out what needs backtracking. CompileJava
// refuses, with a message naming the construct, every Java feature RE2 cannot express
// or would read differently:
//
//   - lookahead and lookbehind: (?=x) (?!x) (?<=x) (?<!x)
//   - backreferences: \1 ... \9, \k<name>
//   - atomic groups (?>x) and possessive quantifiers x*+ x++ x?+ x{n}+
//   - character-class union and intersection: [a-z&&[^aeiou]], [a[bc]] (RE2 would read
//     the '&&' and inner '[' as plain characters, silently)
//   - the anchors \G \Z, the classes \h \H \v \V \R \X, and the flags other than i, m
//     and s (Java's (?U) means Unicode classes; RE2's means ungreedy; (?x) (?d) (?u)
//     (?c) have no RE2 counterpart)
//   - Java-only property names such as \p{javaLowerCase} (RE2 reports them unknown)
//
// Two differences remain and are accepted: without (?m), Java's '$' also matches before
// a final line terminator while RE2's matches only at the very end; and Java's '.'
// excludes \r, \u0085, \u2028 and \u2029 as well as \n, RE2's only \n. Profile patterns
// are applied to single lines, where neither shows.

// ErrRegexp marks a pattern RE2 cannot run as Java would.
var ErrRegexp = errors.New("profile: regular expression not expressible in RE2")

// CompileJava compiles a Java regular expression with RE2, refusing what RE2 would not
// run the same way.
func CompileJava(src string) (*regexp.Regexp, error) {
	if err := checkJava(src); err != nil {
		return nil, fmt.Errorf("%w: %q: %s", ErrRegexp, src, err)
	}
	re, err := regexp.Compile(src)
	if err != nil {
		return nil, fmt.Errorf("%w: %q: %v", ErrRegexp, src, err)
	}
	return re, nil
}

func checkJava(src string) error {
	inClass := false
	for i := 0; i < len(src); i++ {
		c := src[i]
		next := byte(0)
		if i+1 < len(src) {
			next = src[i+1]
		}
		switch {
		case c == '\\':
			if err := checkEscape(next, inClass); err != nil {
				return err
			}
			if next == 'Q' {
				end := strings.Index(src[i:], `\E`)
				if end < 0 {
					return nil
				}
				i += end + 1
				continue
			}
			i++
		case inClass && c == '[':
			return errors.New("nested character classes ([a[bc]]) are Java unions; RE2 reads '[' as a character")
		case inClass && c == '&' && next == '&':
			return errors.New("character-class intersection (&&) is not supported by RE2")
		case inClass && c == ']':
			inClass = false
		case !inClass && c == '[':
			inClass = true
			if next == '^' {
				i++
			}
			if i+1 < len(src) && src[i+1] == ']' {
				i++ // a leading ']' is a literal
			}
		case !inClass && c == '(' && next == '?':
			if err := checkGroup(src[i+2:]); err != nil {
				return err
			}
		case !inClass && (c == '*' || c == '+' || c == '?' || c == '}') && next == '+':
			return fmt.Errorf("possessive quantifier %c+ needs backtracking control RE2 does not have", c)
		}
	}
	return nil
}

func checkEscape(c byte, inClass bool) error {
	switch {
	case c >= '1' && c <= '9' && !inClass:
		return fmt.Errorf(`backreference \%c needs backtracking, which RE2 does not do`, c)
	case c == 'k':
		return errors.New(`named backreference \k<...> needs backtracking, which RE2 does not do`)
	case strings.IndexByte("GZ", c) >= 0:
		return fmt.Errorf(`anchor \%c is not supported by RE2`, c)
	case strings.IndexByte("hHvVRX", c) >= 0:
		return fmt.Errorf(`\%c is a Java class RE2 does not have (or reads differently)`, c)
	}
	return nil
}

func checkGroup(rest string) error {
	switch {
	case strings.HasPrefix(rest, "=") || strings.HasPrefix(rest, "!"):
		return errors.New("lookahead (?=...) / (?!...) is not supported by RE2")
	case strings.HasPrefix(rest, "<=") || strings.HasPrefix(rest, "<!"):
		return errors.New("lookbehind (?<=...) / (?<!...) is not supported by RE2")
	case strings.HasPrefix(rest, ">"):
		return errors.New("atomic group (?>...) is not supported by RE2")
	case strings.HasPrefix(rest, "<") || strings.HasPrefix(rest, "P<") || strings.HasPrefix(rest, ":"):
		return nil
	}
	for _, c := range rest {
		switch c {
		case 'i', 'm', 's', '-':
		case ':', ')':
			return nil
		default:
			return fmt.Errorf("flag (?%c) has no RE2 counterpart with Java's meaning", c)
		}
	}
	return nil
}

// javaReplacement converts a Java replacement string (\x is a literal x, $n and ${name}
// are groups, n read greedily while it names an existing group) into Go's
// Regexp.Expand syntax.
func javaReplacement(s string, groups int) (string, error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '\\':
			if i+1 >= len(s) {
				return "", errors.New("replacement ends with a lone backslash")
			}
			i++
			if s[i] == '$' {
				b.WriteString("$$")
			} else {
				b.WriteByte(s[i])
			}
		case '$':
			n, width, err := groupRef(s[i+1:], groups)
			if err != nil {
				return "", err
			}
			b.WriteString("${" + n + "}")
			i += width
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), nil
}

// groupRef reads the group reference after a '$' and returns it and its width.
func groupRef(s string, groups int) (string, int, error) {
	if strings.HasPrefix(s, "{") {
		end := strings.IndexByte(s, '}')
		if end < 0 {
			return "", 0, errors.New("replacement has an unclosed ${")
		}
		return s[1:end], end + 1, nil
	}
	if s == "" || s[0] < '0' || s[0] > '9' {
		return "", 0, errors.New("replacement has '$' without a group number (write \\$ for a dollar)")
	}
	n := int(s[0] - '0')
	if n > groups {
		return "", 0, fmt.Errorf("replacement refers to group %d, the pattern has %d", n, groups)
	}
	w := 1
	for w < len(s) && s[w] >= '0' && s[w] <= '9' && n*10+int(s[w]-'0') <= groups {
		n = n*10 + int(s[w]-'0')
		w++
	}
	return fmt.Sprint(n), w, nil
}

func replaceAll(re *regexp.Regexp, s, tmpl string) string {
	return re.ReplaceAllString(s, tmpl)
}
