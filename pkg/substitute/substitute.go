// Package substitute resolves the placeholders job descriptions leave for the target to
// fill: a word in braces, such as {taskid}, {queue} or {lrms} of the v3 task description,
// or a JRDL reserved substitution name such as {HOME}. It owns only the placeholder syntax;
// which names a job may use, and what they mean, belong to the job and its caller.
package substitute

import "strings"

// Substitute returns s with every {word} whose word is a key of vars replaced by its
// value. A word is a letter followed by letters, digits or underscores. Any other braced
// text, and any word not in vars, is left exactly as it is. Replacement is one pass: a
// value that itself holds {word} is not substituted again.
func Substitute(s string, vars map[string]string) string {
	if len(vars) == 0 || strings.IndexByte(s, '{') < 0 {
		return s
	}
	var b strings.Builder
	rest := s
	for {
		open := strings.IndexByte(rest, '{')
		if open < 0 {
			break
		}
		n := wordLen(rest[open+1:])
		if n == 0 || open+1+n >= len(rest) || rest[open+1+n] != '}' {
			b.WriteString(rest[:open+1])
			rest = rest[open+1:]
			continue
		}
		val, ok := vars[rest[open+1:open+1+n]]
		if !ok {
			b.WriteString(rest[:open+1+n+1])
		} else {
			b.WriteString(rest[:open])
			b.WriteString(val)
		}
		rest = rest[open+1+n+1:]
	}
	b.WriteString(rest)
	return b.String()
}

// Names returns the distinct words of every {word} in s, in order of first appearance.
func Names(s string) []string {
	var names []string
	for rest := s; ; {
		open := strings.IndexByte(rest, '{')
		if open < 0 {
			return names
		}
		rest = rest[open+1:]
		n := wordLen(rest)
		if n == 0 || n >= len(rest) || rest[n] != '}' {
			continue
		}
		w := rest[:n]
		if !contains(names, w) {
			names = append(names, w)
		}
		rest = rest[n+1:]
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// wordLen is the length of the placeholder word at the start of s, 0 if there is none.
func wordLen(s string) int {
	for i := 0; i < len(s); i++ {
		c := s[i]
		letter := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
		if letter || i > 0 && (c == '_' || c >= '0' && c <= '9') {
			continue
		}
		return i
	}
	return len(s)
}
