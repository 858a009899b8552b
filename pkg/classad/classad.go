// Package classad reads and writes the small part of HTCondor's ClassAd language that
// file transfer plugins exchange: records of named attributes whose values are strings,
// integers, reals, booleans, undefined, nested records and lists. It reads both the
// new syntax ("[ A = 1; B = "x" ]", several records in a row) and the old one (one
// "A = 1" per line, records separated by blank lines), and writes the new one. It does
// not evaluate expressions: an attribute whose value is an expression is refused.
package classad

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Attr is one attribute of a record.
type Attr struct {
	Name  string
	Value any // string, int64, float64, bool, nil (undefined), Ad, []any
}

// Ad is one record, attributes in the order written.
type Ad []Attr

// Lookup finds an attribute by name, case-insensitively as ClassAds compare names.
func (a Ad) Lookup(name string) (any, bool) {
	for _, at := range a {
		if strings.EqualFold(at.Name, name) {
			return at.Value, true
		}
	}
	return nil, false
}

// String is a string attribute's value.
func (a Ad) String(name string) (string, bool) {
	v, ok := a.Lookup(name)
	s, isStr := v.(string)
	return s, ok && isStr
}

// Bool is a boolean attribute's value.
func (a Ad) Bool(name string) (bool, bool) {
	v, ok := a.Lookup(name)
	b, isBool := v.(bool)
	return b, ok && isBool
}

// Int is an integer attribute's value.
func (a Ad) Int(name string) (int64, bool) {
	v, ok := a.Lookup(name)
	n, isInt := v.(int64)
	return n, ok && isInt
}

// Format writes the record in the new syntax on one line.
func (a Ad) Format() string {
	var b strings.Builder
	b.WriteString("[ ")
	for i, at := range a {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(at.Name + " = " + formatValue(at.Value))
	}
	b.WriteString(" ]")
	return b.String()
}

func formatValue(v any) string {
	switch v := v.(type) {
	case string:
		return Quote(v)
	case int64:
		return strconv.FormatInt(v, 10)
	case int:
		return strconv.Itoa(v)
	case float64:
		return strconv.FormatFloat(v, 'g', -1, 64)
	case bool:
		return strconv.FormatBool(v)
	case Ad:
		return v.Format()
	case []any:
		parts := make([]string, len(v))
		for i, e := range v {
			parts[i] = formatValue(e)
		}
		return "{ " + strings.Join(parts, ", ") + " }"
	}
	return "undefined"
}

// Quote writes s as a ClassAd string literal.
func Quote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ { // bytes, so a name that is not UTF-8 survives
		switch r := s[i]; r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\t':
			b.WriteString(`\t`)
		case '\r':
			b.WriteString(`\r`)
		default:
			if r < 0x20 || r == 0x7f {
				fmt.Fprintf(&b, `\%03o`, r)
				continue
			}
			b.WriteByte(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// ErrSyntax is wrapped by every parse error, which says line:col and what was wrong.
var ErrSyntax = errors.New("classad: syntax error")

// MaxDepth bounds nested records and lists.
const MaxDepth = 32

// Parse reads every record in data: a row of new-syntax records, or old-syntax records
// separated by blank lines.
func Parse(data []byte) ([]Ad, error) {
	p := &parser{s: string(data), line: 1, col: 1}
	p.skipSpace(true)
	if p.eof() {
		return nil, nil
	}
	if p.peek() == '[' {
		var ads []Ad
		for p.skipSpace(true); !p.eof(); p.skipSpace(true) {
			ad, err := p.record(0)
			if err != nil {
				return nil, err
			}
			ads = append(ads, ad)
		}
		return ads, nil
	}
	return p.oldRecords()
}

type parser struct {
	s         string
	i         int
	line, col int
}

func (p *parser) eof() bool  { return p.i >= len(p.s) }
func (p *parser) peek() byte { return p.s[p.i] }

func (p *parser) next() byte {
	c := p.s[p.i]
	p.i++
	if c == '\n' {
		p.line, p.col = p.line+1, 1
	} else {
		p.col++
	}
	return c
}

func (p *parser) errorf(format string, args ...any) error {
	return fmt.Errorf("%w: %d:%d: %s", ErrSyntax, p.line, p.col, fmt.Sprintf(format, args...))
}

// skipSpace skips blanks (and newlines when nl), and // and /* */ comments.
func (p *parser) skipSpace(nl bool) {
	for !p.eof() {
		c := p.peek()
		switch {
		case c == ' ' || c == '\t' || c == '\r' || nl && c == '\n':
			p.next()
		case strings.HasPrefix(p.s[p.i:], "//") || c == '#' && p.col == 1:
			for !p.eof() && p.peek() != '\n' {
				p.next()
			}
		case strings.HasPrefix(p.s[p.i:], "/*"):
			end := strings.Index(p.s[p.i+2:], "*/")
			if end < 0 {
				p.i = len(p.s)
				return
			}
			for n := end + 4; n > 0; n-- {
				p.next()
			}
		default:
			return
		}
	}
}

// oldRecords reads "Name = value" lines; a blank line ends a record.
func (p *parser) oldRecords() ([]Ad, error) {
	var ads []Ad
	var cur Ad
	for {
		p.skipSpace(false)
		switch {
		case p.eof():
			if len(cur) > 0 {
				ads = append(ads, cur)
			}
			return ads, nil
		case p.peek() == '\n':
			p.next()
			if p.blankLineAhead() && len(cur) > 0 {
				ads, cur = append(ads, cur), nil
			}
			continue
		}
		at, err := p.attr(0)
		if err != nil {
			return nil, err
		}
		cur = append(cur, at)
		p.skipSpace(false)
		if !p.eof() && p.peek() == ';' {
			p.next()
			p.skipSpace(false)
		}
		if !p.eof() && p.peek() != '\n' {
			return nil, p.errorf("want the end of the line after attribute %s", at.Name)
		}
	}
}

// blankLineAhead reports whether the line that starts here is empty.
func (p *parser) blankLineAhead() bool {
	for j := p.i; j < len(p.s); j++ {
		switch p.s[j] {
		case ' ', '\t', '\r':
		case '\n':
			return true
		default:
			return false
		}
	}
	return true
}

func (p *parser) record(depth int) (Ad, error) {
	if depth >= MaxDepth {
		return nil, p.errorf("records nested deeper than %d", MaxDepth)
	}
	if p.eof() || p.next() != '[' {
		return nil, p.errorf("want '['")
	}
	ad := Ad{}
	for {
		p.skipSpace(true)
		if p.eof() {
			return nil, p.errorf("record not closed with ']'")
		}
		switch p.peek() {
		case ']':
			p.next()
			return ad, nil
		case ';':
			p.next()
			continue
		}
		at, err := p.attr(depth)
		if err != nil {
			return nil, err
		}
		ad = append(ad, at)
		p.skipSpace(true)
		if !p.eof() && p.peek() != ';' && p.peek() != ']' {
			return nil, p.errorf("want ';' or ']' after attribute %s", at.Name)
		}
	}
}

func (p *parser) attr(depth int) (Attr, error) {
	start := p.i
	for !p.eof() && isNameByte(p.peek(), p.i == start) {
		p.next()
	}
	name := p.s[start:p.i]
	if name == "" {
		return Attr{}, p.errorf("want an attribute name")
	}
	p.skipSpace(false)
	if p.eof() || p.next() != '=' {
		return Attr{}, p.errorf("want '=' after %s", name)
	}
	p.skipSpace(false)
	v, err := p.value(depth)
	if err != nil {
		return Attr{}, err
	}
	return Attr{Name: name, Value: v}, nil
}

func isNameByte(c byte, first bool) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || !first && c >= '0' && c <= '9'
}

func (p *parser) value(depth int) (any, error) {
	if p.eof() {
		return nil, p.errorf("want a value")
	}
	switch c := p.peek(); {
	case c == '"':
		return p.str()
	case c == '[':
		return p.record(depth + 1)
	case c == '{':
		return p.list(depth + 1)
	case c == '-' || c == '+' || c >= '0' && c <= '9' || c == '.':
		return p.number()
	case isNameByte(c, true):
		start := p.i
		for !p.eof() && isNameByte(p.peek(), false) {
			p.next()
		}
		switch w := strings.ToLower(p.s[start:p.i]); w {
		case "true":
			return true, nil
		case "false":
			return false, nil
		case "undefined", "error":
			return nil, nil
		default:
			return nil, p.errorf("%s is an expression, not a literal value", p.s[start:p.i])
		}
	}
	return nil, p.errorf("unexpected %q", p.peek())
}

func (p *parser) list(depth int) ([]any, error) {
	if depth >= MaxDepth {
		return nil, p.errorf("lists nested deeper than %d", MaxDepth)
	}
	p.next() // '{'
	out := []any{}
	for {
		p.skipSpace(true)
		if p.eof() {
			return nil, p.errorf("list not closed with '}'")
		}
		switch p.peek() {
		case '}':
			p.next()
			return out, nil
		case ',':
			p.next()
			continue
		}
		v, err := p.value(depth)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
}

func (p *parser) number() (any, error) {
	start := p.i
	for !p.eof() && strings.IndexByte("+-.0123456789eE", p.peek()) >= 0 {
		p.next()
	}
	text := p.s[start:p.i]
	if n, err := strconv.ParseInt(text, 10, 64); err == nil {
		return n, nil
	}
	f, err := strconv.ParseFloat(text, 64)
	if err != nil {
		return nil, p.errorf("%q is not a number", text)
	}
	return f, nil
}

func (p *parser) str() (string, error) {
	p.next() // '"'
	var b strings.Builder
	for {
		if p.eof() {
			return "", p.errorf("string not closed")
		}
		c := p.next()
		switch c {
		case '"':
			return b.String(), nil
		case '\n':
			return "", p.errorf("newline in a string")
		case '\\':
			if p.eof() {
				return "", p.errorf("string not closed")
			}
			if err := p.escape(&b); err != nil {
				return "", err
			}
		default:
			b.WriteByte(c)
		}
	}
}

func (p *parser) escape(b *strings.Builder) error {
	c := p.next()
	switch c {
	case 'n':
		b.WriteByte('\n')
	case 't':
		b.WriteByte('\t')
	case 'r':
		b.WriteByte('\r')
	case '"', '\\', '\'', '/':
		b.WriteByte(c)
	default:
		if c < '0' || c > '7' {
			return p.errorf("unknown escape \\%c", c)
		}
		n := int(c - '0')
		for k := 0; k < 2 && !p.eof() && p.peek() >= '0' && p.peek() <= '7'; k++ {
			n = n*8 + int(p.next()-'0')
		}
		if n > 0xff {
			return p.errorf("octal escape over \\377")
		}
		b.WriteByte(byte(n))
	}
	return nil
}
