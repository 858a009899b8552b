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
	p := jsonParser{data: data, src: string(data), line: 1}
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
	slab      []Node  // nodes are carved from here, to allocate in bulk
	fieldSlab []Field // and the fields of objects
	// the sizes of the last slabs: each next one doubles up to a bound, so a small
	// document (most items of a bulk submission) allocates little
	slabN, fieldSlabN int
	fields            []Field // fields of the objects being read, innermost last
	data              []byte
	src               string // data as a string: strings without escapes are slices of it
	off               int
	line              int
	lineStart         int
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
	n := p.node()
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

func (p *jsonParser) node() *Node {
	if len(p.slab) == 0 {
		p.slabN = min(max(2*p.slabN, 4), 32)
		p.slab = make([]Node, p.slabN)
	}
	n := &p.slab[0]
	p.slab = p.slab[1:]
	n.Line, n.Col = p.line, p.col()
	return n
}

// keep copies an object's fields out of the stack into the slab.
func (p *jsonParser) keep(fields []Field) []Field {
	if len(fields) > len(p.fieldSlab) {
		p.fieldSlabN = min(max(2*p.fieldSlabN, 8), 64)
		p.fieldSlab = make([]Field, max(p.fieldSlabN, len(fields)))
	}
	out := p.fieldSlab[:len(fields):len(fields)]
	p.fieldSlab = p.fieldSlab[len(fields):]
	copy(out, fields)
	return out
}

// duplicate reports whether key is already among fields (a linear scan: objects in a
// job description are small; a map is built only for large ones).
func duplicate(fields []Field, key string, seen map[string]struct{}) bool {
	if seen != nil {
		_, dup := seen[key]
		return dup
	}
	for i := range fields {
		if fields[i].Key == key {
			return true
		}
	}
	return false
}

func (p *jsonParser) object(n *Node, depth int) error {
	n.Kind = Object
	p.off++
	p.skipSpace()
	if p.off < len(p.data) && p.data[p.off] == '}' {
		p.off++
		return nil
	}
	base := len(p.fields)
	defer func() { p.fields = p.fields[:base] }()
	var seen map[string]struct{}
	for {
		if p.off >= len(p.data) || p.data[p.off] != '"' {
			return p.errorf("unexpected " + p.describe() + ", expected a key in quotes")
		}
		f := Field{Line: p.line, Col: p.col()}
		key, err := p.str()
		if err != nil {
			return err
		}
		if duplicate(p.fields[base:], key, seen) {
			return &SyntaxError{Line: f.Line, Col: f.Col, What: "duplicate key " + strconv.Quote(key)}
		}
		if len(p.fields)-base == 16 {
			seen = make(map[string]struct{}, 32)
			for _, f := range p.fields[base:] {
				seen[f.Key] = struct{}{}
			}
		}
		if seen != nil {
			seen[key] = struct{}{}
		}
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
		p.fields = append(p.fields, f)
		p.skipSpace()
		if p.off < len(p.data) && p.data[p.off] == ',' {
			p.off++
			p.skipSpace()
			continue
		}
		if p.off < len(p.data) && p.data[p.off] == '}' {
			p.off++
			n.Fields = p.keep(p.fields[base:])
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
			s := p.src[start:p.off]
			p.off++
			if !utf8.ValidString(s) {
				return "", &SyntaxError{Line: p.line, Col: start - p.lineStart + 1, What: "string is not valid UTF-8"}
			}
			return s, nil
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
