package profile

import (
	"fmt"
	"strings"

	"github.com/gridwire/gridwire/pkg/shellquote"
)

func quote(s string) string { return shellquote.Quote(s) }

// The lexer reads template text as POSIX shell, far enough to know the quoting context
// of each replacement (a NUL in its input). It errs on the side of refusing: wherever
// the reading could diverge from a real shell's (case patterns inside $(...), bash's
// $'...'), every later replacement is marked unsafe for job values.

type frame uint8

const (
	fPlain   frame = iota
	fCmd           // $( ... )
	fDouble        // " ... "
	fSingle        // ' ... '
	fBack          // ` ... `
	fArith         // $(( ... ))
	fParam         // ${ ... }
	fComment       // # ... end of line
	fAnsi          // bash's $' ... '
)

type lexer struct {
	src       string
	stack     []frame
	depth     []int // parenthesis depth per frame (fCmd, fArith)
	places    []Place
	uncertain string
	word      strings.Builder // the current plain word, to spot "case"
	heredocs  []heredoc       // delimiters waiting for the next newline
}

type heredoc struct {
	delim    string
	stripTab bool
}

func (l *lexer) top() frame { return l.stack[len(l.stack)-1] }

func (l *lexer) push(f frame) {
	l.stack = append(l.stack, f)
	l.depth = append(l.depth, 0)
}

func (l *lexer) pop() {
	if len(l.stack) > 1 {
		l.stack = l.stack[:len(l.stack)-1]
		l.depth = l.depth[:len(l.depth)-1]
	}
}

func (l *lexer) inStack(f frame) bool {
	for _, g := range l.stack {
		if g == f {
			return true
		}
	}
	return false
}

// lexPlaces returns the place of each NUL in src.
func lexPlaces(src string) ([]Place, error) {
	l := &lexer{src: src}
	l.push(fPlain)
	i := 0
	for i < len(src) {
		i = l.step(i)
	}
	if len(l.heredocs) > 0 {
		return nil, fmt.Errorf("here-document %q is never closed", l.heredocs[0].delim)
	}
	if f := l.top(); f != fPlain && f != fComment {
		return nil, fmt.Errorf("the text ends inside %s; it would swallow the script text after it", frameName(f))
	}
	return l.places, nil
}

func frameName(f frame) string {
	return [...]string{"plain text", "$(...)", "double quotes", "single quotes", "backquotes", "$((...))", "${...}", "a comment", "$'...'"}[f]
}

func (l *lexer) at(i int) byte {
	if i < len(l.src) {
		return l.src[i]
	}
	return 0xff
}

// step reads from src[i] and returns where to go on.
func (l *lexer) step(i int) int {
	c := l.src[i]
	if c == 0 {
		l.places = append(l.places, l.place(i))
		l.word.WriteByte('x')
		return i + 1
	}
	switch l.top() {
	case fComment:
		if c == '\n' {
			l.pop()
			return l.newline(i)
		}
		return i + 1
	case fSingle:
		if c == '\'' {
			l.pop()
		}
		return i + 1
	case fAnsi:
		if c == '\\' {
			return i + 2
		}
		if c == '\'' {
			l.pop()
		}
		return i + 1
	case fDouble:
		return l.double(i, c)
	case fArith:
		return l.arith(i, c)
	}
	return l.plain(i, c)
}

func (l *lexer) double(i int, c byte) int {
	switch c {
	case '\\':
		return l.escape(i)
	case '"':
		l.pop()
	case '`':
		l.push(fBack)
	case '$':
		return l.dollar(i)
	}
	return i + 1
}

func (l *lexer) arith(i int, c byte) int {
	d := &l.depth[len(l.depth)-1]
	switch {
	case c == '(':
		*d++
	case c == ')' && *d > 0:
		*d--
	case c == ')' && l.at(i+1) == ')':
		l.pop()
		return i + 2
	case c == '$':
		return l.dollar(i)
	}
	return i + 1
}

// escape skips a backslash and the byte it quotes; a replacement right after a
// backslash would have its opening quote escaped.
func (l *lexer) escape(i int) int {
	if l.at(i+1) == 0 {
		l.places = append(l.places, Place{Kind: PlaceUnsafe, Reason: "right after a backslash"})
	}
	if l.at(i+1) == '\n' {
		return i + 2
	}
	return i + 2
}

func (l *lexer) dollar(i int) int {
	switch l.at(i + 1) {
	case '(':
		if l.at(i+2) == '(' {
			l.push(fArith)
			return i + 3
		}
		l.push(fCmd)
		return i + 2
	case '{':
		l.push(fParam)
		return i + 2
	case '\'':
		if l.top() != fDouble {
			l.distrust("bash's $'...' quoting, which POSIX shells read differently")
			l.push(fAnsi)
			return i + 2
		}
	case 0:
		l.places = append(l.places, Place{Kind: PlaceUnsafe, Reason: "right after a $"})
		return i + 2
	}
	return i + 1
}

func (l *lexer) distrust(why string) {
	if l.uncertain == "" {
		l.uncertain = "after " + why
	}
}

// plain handles plain text, $(...), backquotes and ${...}: quotes open, substitutions
// nest, comments and here-documents start.
func (l *lexer) plain(i int, c byte) int {
	wordStart := i == 0 || strings.IndexByte(" \t\n;&|()<>", l.src[i-1]) >= 0
	if !isNameByte(c) {
		l.endWord()
	}
	switch c {
	case '\\':
		return l.escape(i)
	case '\'':
		l.push(fSingle)
	case '"':
		l.push(fDouble)
	case '`':
		if l.top() == fBack {
			l.pop()
		} else {
			l.push(fBack)
		}
	case '$':
		return l.dollar(i)
	case '}':
		if l.top() == fParam {
			l.pop()
		}
	case '(':
		if l.top() == fCmd {
			l.depth[len(l.depth)-1]++
		}
	case ')':
		if l.top() == fCmd {
			if l.depth[len(l.depth)-1] > 0 {
				l.depth[len(l.depth)-1]--
			} else {
				l.pop()
			}
		}
	case '#':
		if wordStart && l.top() != fParam {
			l.push(fComment)
		}
	case '<':
		if l.at(i+1) == '<' && l.at(i+2) != '<' {
			return l.heredocStart(i + 2)
		}
		if l.at(i+1) == '<' {
			return i + 3
		}
	case '\n':
		return l.newline(i)
	default:
		if isNameByte(c) {
			l.word.WriteByte(c)
		}
	}
	return i + 1
}

func (l *lexer) endWord() {
	if l.word.String() == "case" && l.inStack(fCmd) {
		l.distrust("a case statement inside $(...)")
	}
	l.word.Reset()
}

// heredocStart reads the delimiter word after "<<" or "<<-".
func (l *lexer) heredocStart(i int) int {
	h := heredoc{}
	if l.at(i) == '-' {
		h.stripTab = true
		i++
	}
	for l.at(i) == ' ' || l.at(i) == '\t' {
		i++
	}
	var d strings.Builder
	for ; i < len(l.src) && strings.IndexByte(" \t\n;&|<>()", l.src[i]) < 0; i++ {
		switch l.src[i] {
		case '\'', '"', '\\':
		case 0:
			l.places = append(l.places, Place{Kind: PlaceUnsafe, Reason: "as a here-document delimiter"})
			l.distrust("a here-document with a replaced delimiter")
		default:
			d.WriteByte(l.src[i])
		}
	}
	h.delim = d.String()
	l.heredocs = append(l.heredocs, h)
	return i
}

// newline starts the bodies of pending here-documents: their lines are read up to the
// delimiter line, and a replacement in them is unsafe for job values.
func (l *lexer) newline(i int) int {
	i++
	for len(l.heredocs) > 0 {
		h := l.heredocs[0]
		closed := false
		for i < len(l.src) && !closed {
			end := strings.IndexByte(l.src[i:], '\n')
			if end < 0 {
				end = len(l.src) - i
			}
			line := l.src[i : i+end]
			for k := 0; k < len(line); k++ {
				if line[k] == 0 {
					l.places = append(l.places, Place{Kind: PlaceUnsafe, Reason: "inside a here-document"})
				}
			}
			if h.stripTab {
				line = strings.TrimLeft(line, "\t")
			}
			closed = line == h.delim
			i += end + 1
		}
		if !closed {
			return len(l.src)
		}
		l.heredocs = l.heredocs[1:]
	}
	return i
}

// place is the context of the replacement at src[i].
func (l *lexer) place(i int) Place {
	if l.uncertain != "" {
		return Place{Kind: PlaceUnsafe, Reason: l.uncertain}
	}
	for _, f := range l.stack {
		switch f {
		case fBack:
			return Place{Kind: PlaceUnsafe, Reason: "inside backquotes (use $(...))"}
		case fParam:
			return Place{Kind: PlaceUnsafe, Reason: "inside ${...}"}
		case fComment:
			return Place{Kind: PlaceUnsafe, Reason: "inside a comment"}
		}
	}
	if i > 0 && l.src[i-1] == '$' {
		return Place{Kind: PlaceUnsafe, Reason: "right after a $"}
	}
	switch l.top() {
	case fDouble:
		return Place{Kind: PlaceDouble}
	case fSingle:
		return Place{Kind: PlaceSingle}
	case fArith:
		return Place{Kind: PlaceArith}
	}
	if l.inStack(fArith) {
		return Place{Kind: PlaceArith}
	}
	return Place{Kind: PlacePlain}
}
