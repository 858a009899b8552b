// Package shellquote turns arbitrary strings into POSIX shell words that a shell reads
// back byte for byte as one argument. It owns quoting only; it never runs a shell.
package shellquote

import "strings"

// Quote returns s as one single-quoted POSIX shell word. Inside single quotes nothing is
// special except the quote itself, which is written as '\”. The empty string becomes ”.
// Every byte other than the quote passes through unchanged, newlines and NULs' neighbours
// included, so the word always expands to exactly s.
func Quote(s string) string {
	if s != "" && isSafe(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte('\'')
	for i := 0; i < len(s); i++ {
		if s[i] == '\'' {
			b.WriteString(`'\''`)
			continue
		}
		b.WriteByte(s[i])
	}
	b.WriteByte('\'')
	return b.String()
}

// Join quotes every word and joins them with single spaces.
func Join(words ...string) string {
	var b strings.Builder
	for i, w := range words {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(Quote(w))
	}
	return b.String()
}

// isSafe reports whether s is made only of bytes no POSIX shell treats specially in any
// position, and does not start with a character that changes meaning at word start.
func isSafe(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case c == '_' || c == '/' || c == '.' || c == ',' || c == '+' || c == '@' || c == '%':
		case c == '-' || c == ':':
			// '=' is never safe: as a command's first word, a=b is an assignment.
		default:
			return false
		}
	}
	return true
}

// IsName reports whether s is a POSIX shell name (a variable a script may export):
// letters, digits and underscores, not starting with a digit.
func IsName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}
