package tree

import (
	"bytes"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// ParseJSON reads one JSON value (RFC 8259, UTF-8) with positions. Anything after the
// value but whitespace is an error, as are duplicate keys and nesting past MaxDepth.
func ParseJSON(data []byte) (*Node, error) {
	p := jsonParser{data: data, line: 1}
	if bytes.HasPrefix(data, []byte("\xef\xbb\xbf")) { // a UTF-8 byte order mark may lead
		p.off, p.lineStart = 3, 3
	}
	p.skipSpace()
	n, err := p.value(0)
	if err != nil {
		return nil, err
	}
	p.skipSpace()
	if p.off < len(p.data) {
		return nil, p.errorf("unexpected " + p.describe() + " after the document")
	}
	return n, nil
}

type jsonParser struct {
	data      []byte
	off       int
	line      int
	lineStart int
}

func (p *jsonParser) col() int { return p.off - p.lineStart + 1 }

func (p *jsonParser) errorf(what string) *SyntaxError {
	return &SyntaxError{Line: p.line, Col: p.col(), What: what}
}

func (p *jsonParser) describe() string {
	if p.off >= len(p.data) {
		return "end of input"
	}
	r, _ := utf8.DecodeRune(p.data[p.off:])
	return strconv.QuoteRune(r)
}

func (p *jsonParser) skipSpace() {
	for p.off < len(p.data) {
		switch p.data[p.off] {
		case ' ', '\t', '\r':
		case '\n':
			p.line++
			p.lineStart = p.off + 1
		default:
			return
		}
		p.off++
	}
}

func (p *jsonParser) value(depth int) (*Node, error) {
	if depth > MaxDepth {
		return nil, p.errorf("nested deeper than " + strconv.Itoa(MaxDepth) + " levels")
	}
	n := &Node{Line: p.line, Col: p.col()}
	if p.off >= len(p.data) {
		return nil, p.errorf("unexpected end of input, expected a value")
	}
	switch c := p.data[p.off]; {
	case c == '{':
		return n, p.object(n, depth)
	case c == '[':
		return n, p.array(n, depth)
	case c == '"':
		s, err := p.str()
		n.Kind, n.Text = String, s
		return n, err
	case c == '-' || c >= '0' && c <= '9':
		n.Kind = Number
		s, err := p.number()
		n.Text = s
		return n, err
	default:
		for _, lit := range [...]struct {
			word string
			kind Kind
		}{{"true", Bool}, {"false", Bool}, {"null", Null}} {
			if bytes.HasPrefix(p.data[p.off:], []byte(lit.word)) {
				p.off += len(lit.word)
				n.Kind, n.Text = lit.kind, lit.word
				return n, nil
			}
		}
		return nil, p.errorf("unexpected " + p.describe() + ", expected a value")
	}
}

func (p *jsonParser) object(n *Node, depth int) error {
	n.Kind = Object
	p.off++
	p.skipSpace()
	if p.off < len(p.data) && p.data[p.off] == '}' {
		p.off++
		return nil
	}
	seen := make(map[string]struct{}, 8)
	for {
		if p.off >= len(p.data) || p.data[p.off] != '"' {
			return p.errorf("unexpected " + p.describe() + ", expected a key in quotes")
		}
		f := Field{Line: p.line, Col: p.col()}
		key, err := p.str()
		if err != nil {
			return err
		}
		if _, dup := seen[key]; dup {
			return &SyntaxError{Line: f.Line, Col: f.Col, What: "duplicate key " + strconv.Quote(key)}
		}
		seen[key] = struct{}{}
		f.Key = key
		p.skipSpace()
		if p.off >= len(p.data) || p.data[p.off] != ':' {
			return p.errorf("unexpected " + p.describe() + ", expected ':'")
		}
		p.off++
		p.skipSpace()
		if f.Value, err = p.value(depth + 1); err != nil {
			return err
		}
		n.Fields = append(n.Fields, f)
		p.skipSpace()
		if p.off < len(p.data) && p.data[p.off] == ',' {
			p.off++
			p.skipSpace()
			continue
		}
		if p.off < len(p.data) && p.data[p.off] == '}' {
			p.off++
			return nil
		}
		return p.errorf("unexpected " + p.describe() + ", expected ',' or '}'")
	}
}

func (p *jsonParser) array(n *Node, depth int) error {
	n.Kind = Array
	p.off++
	p.skipSpace()
	if p.off < len(p.data) && p.data[p.off] == ']' {
		p.off++
		return nil
	}
	for {
		item, err := p.value(depth + 1)
		if err != nil {
			return err
		}
		n.Items = append(n.Items, item)
		p.skipSpace()
		if p.off < len(p.data) && p.data[p.off] == ',' {
			p.off++
			p.skipSpace()
			continue
		}
		if p.off < len(p.data) && p.data[p.off] == ']' {
			p.off++
			return nil
		}
		return p.errorf("unexpected " + p.describe() + ", expected ',' or ']'")
	}
}

func (p *jsonParser) number() (string, error) {
	start := p.off
	digits := func() int {
		s := p.off
		for p.off < len(p.data) && p.data[p.off] >= '0' && p.data[p.off] <= '9' {
			p.off++
		}
		return p.off - s
	}
	if p.data[p.off] == '-' {
		p.off++
	}
	first := p.off
	if n := digits(); n == 0 || n > 1 && p.data[first] == '0' {
		p.off = start
		return "", p.errorf("malformed number")
	}
	if p.off < len(p.data) && p.data[p.off] == '.' {
		p.off++
		if digits() == 0 {
			return "", p.errorf("malformed number: digits must follow '.'")
		}
	}
	if p.off < len(p.data) && (p.data[p.off] == 'e' || p.data[p.off] == 'E') {
		p.off++
		if p.off < len(p.data) && (p.data[p.off] == '+' || p.data[p.off] == '-') {
			p.off++
		}
		if digits() == 0 {
			return "", p.errorf("malformed number: digits must follow the exponent")
		}
	}
	return string(p.data[start:p.off]), nil
}

// str reads a quoted string at p.off.
func (p *jsonParser) str() (string, error) {
	p.off++
	start := p.off
	for p.off < len(p.data) {
		c := p.data[p.off]
		if c == '"' {
			s := p.data[start:p.off]
			p.off++
			if !utf8.Valid(s) {
				return "", &SyntaxError{Line: p.line, Col: start - p.lineStart + 1, What: "string is not valid UTF-8"}
			}
			return string(s), nil
		}
		if c == '\\' || c < 0x20 {
			return p.strSlow(start)
		}
		p.off++
	}
	return "", p.errorf("unterminated string")
}

// strSlow reads a string holding escapes, from start (just after the quote).
func (p *jsonParser) strSlow(start int) (string, error) {
	var b strings.Builder
	b.Write(p.data[start:p.off])
	for p.off < len(p.data) {
		c := p.data[p.off]
		switch {
		case c == '"':
			p.off++
			if !utf8.ValidString(b.String()) {
				return "", &SyntaxError{Line: p.line, Col: start - p.lineStart + 1, What: "string is not valid UTF-8"}
			}
			return b.String(), nil
		case c < 0x20:
			return "", p.errorf("control character in string (escape it)")
		case c == '\\':
			r, err := p.escape()
			if err != nil {
				return "", err
			}
			b.WriteRune(r)
		default:
			b.WriteByte(c)
			p.off++
		}
	}
	return "", p.errorf("unterminated string")
}

func (p *jsonParser) escape() (rune, error) {
	if p.off+1 >= len(p.data) {
		return 0, p.errorf("unterminated string")
	}
	c := p.data[p.off+1]
	if r, ok := map[byte]rune{'"': '"', '\\': '\\', '/': '/', 'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t'}[c]; ok {
		p.off += 2
		return r, nil
	}
	if c != 'u' {
		return 0, p.errorf("invalid escape \\" + string(rune(c)))
	}
	r, ok := p.hex4(p.off + 2)
	if !ok {
		return 0, p.errorf("invalid \\u escape")
	}
	p.off += 6
	if utf16.IsSurrogate(r) {
		if p.off+1 < len(p.data) && p.data[p.off] == '\\' && p.data[p.off+1] == 'u' {
			if r2, ok := p.hex4(p.off + 2); ok {
				if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
					p.off += 6
					return dec, nil
				}
			}
		}
		return utf8.RuneError, nil
	}
	return r, nil
}

func (p *jsonParser) hex4(at int) (rune, bool) {
	if at+4 > len(p.data) {
		return 0, false
	}
	v, err := strconv.ParseUint(string(p.data[at:at+4]), 16, 32)
	return rune(v), err == nil
}
