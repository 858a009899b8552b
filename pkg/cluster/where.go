package cluster

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// A fieldError is one thing wrong with the config file, where it is: printed as
// "gw.yaml:12: clusters[1].kind: "forky" is not fork or ssh". Each wraps ErrInvalid.
type fieldError struct {
	file string
	line int
	path string // clusters[1].kind, stager.http.allow; "" for the file as a whole
	msg  string
}

func (e *fieldError) Error() string {
	var b strings.Builder
	if e.file != "" {
		b.WriteString(e.file)
		if e.line > 0 {
			b.WriteString(":" + strconv.Itoa(e.line))
		}
		b.WriteString(": ")
	} else if e.line > 0 {
		b.WriteString("line " + strconv.Itoa(e.line) + ": ")
	}
	if e.path != "" {
		b.WriteString(e.path + ": ")
	}
	b.WriteString(e.msg)
	return b.String()
}

func (e *fieldError) Unwrap() error { return ErrInvalid }

func invalid(path, format string, args ...any) error {
	return &fieldError{path: path, msg: fmt.Sprintf(format, args...)}
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// positions is where each field of a YAML document is: the line of every key and
// sequence item by its path, and every scalar value with its path, in document order.
type positions struct {
	lines   map[string]int
	scalars []scalarAt
}

type scalarAt struct {
	line  int
	value string
	path  string
}

func positionsOf(node *yaml.Node, path string) *positions {
	p := &positions{lines: map[string]int{}}
	p.walk(node, path)
	return p
}

func (p *positions) walk(node *yaml.Node, path string) {
	switch node.Kind {
	case yaml.DocumentNode:
		for _, n := range node.Content {
			p.walk(n, path)
		}
	case yaml.AliasNode:
		if node.Alias != nil {
			p.walk(node.Alias, path)
		}
	case yaml.SequenceNode:
		for i, item := range node.Content {
			ip := fmt.Sprintf("%s[%d]", path, i)
			p.lines[ip] = item.Line
			p.walk(item, ip)
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(node.Content); i += 2 {
			kp := joinPath(path, node.Content[i].Value)
			p.lines[kp] = node.Content[i].Line
			p.walk(node.Content[i+1], kp)
		}
	case yaml.ScalarNode:
		p.scalars = append(p.scalars, scalarAt{node.Line, node.Value, path})
	}
}

// lineOf is the line of path, or of the nearest enclosing field written in the file
// (a missing field is reported where its cluster is).
func (p *positions) lineOf(path string) int {
	for path != "" {
		if l, ok := p.lines[path]; ok {
			return l
		}
		i := strings.LastIndexAny(path, ".[")
		if i < 0 {
			break
		}
		path = path[:i]
	}
	return 0
}

// pathAt is the path of the scalar value on line (the one written as value, when a flow
// mapping holds several on that line).
func (p *positions) pathAt(line int, value string) string {
	found := ""
	for _, s := range p.scalars {
		if s.line != line {
			continue
		}
		if s.value == value {
			return s.path
		}
		if found == "" {
			found = s.path
		}
	}
	return found
}

// keyAt is the path of the outermost key written on line.
func (p *positions) keyAt(line int) string {
	best := ""
	for path, l := range p.lines {
		if l == line && (best == "" || len(path) < len(best) || len(path) == len(best) && path < best) {
			best = path
		}
	}
	return best
}

var (
	lineMsg    = regexp.MustCompile(`^(?:yaml: )?line (\d+): (.*)$`)
	cannotInto = regexp.MustCompile("^cannot unmarshal !!(\\w+)(?: `(.*)`)? into (.+)$")
)

// decodeErrors turns a yaml.v3 error into fieldErrors naming the file, line and field:
// "line 4: cannot unmarshal !!str `lots` into int64" becomes
// "gw.yaml:4: clusters[0].info.smp_size: "lots" is not a whole number".
func decodeErrors(file string, err error, pos *positions) []error {
	var own *fieldError // a field's own UnmarshalYAML (Retention) says its line
	if errors.As(err, &own) {
		c := *own
		c.file = file
		if c.path == "" && pos != nil {
			c.path = pos.keyAt(c.line)
		}
		return []error{&c}
	}
	msgs := []string{err.Error()}
	var te *yaml.TypeError
	if errors.As(err, &te) {
		msgs = te.Errors
	}
	out := make([]error, 0, len(msgs))
	for _, m := range msgs {
		fe := &fieldError{file: file, msg: strings.TrimPrefix(m, "yaml: ")}
		if g := lineMsg.FindStringSubmatch(m); g != nil {
			fe.line, _ = strconv.Atoi(g[1])
			fe.msg = g[2]
			scalar, value := true, ""
			if c := cannotInto.FindStringSubmatch(fe.msg); c != nil {
				switch c[1] {
				case "seq":
					scalar, fe.msg = false, "a list is not "+kindOf(c[3])
				case "map":
					scalar, fe.msg = false, "a mapping is not "+kindOf(c[3])
				default:
					value, fe.msg = c[2], fmt.Sprintf("%q is not %s", c[2], kindOf(c[3]))
				}
			}
			switch {
			case pos == nil:
			case scalar:
				fe.path = pos.pathAt(fe.line, value)
			default: // a list or mapping where a value belongs: the key it is under
				fe.path = pos.keyAt(fe.line)
			}
		}
		out = append(out, fe)
	}
	return out
}

// kindOf names a Go type a YAML value failed to decode into in the user's words.
func kindOf(goType string) string {
	switch {
	case goType == "time.Duration":
		return "a duration (such as 90s or 2m)"
	case strings.HasPrefix(goType, "[]"):
		return "a list"
	case strings.HasPrefix(goType, "map["), strings.Contains(goType, "."):
		return "a mapping of keys"
	case strings.HasPrefix(goType, "int"), strings.HasPrefix(goType, "uint"):
		return "a whole number"
	case strings.HasPrefix(goType, "float"):
		return "a number"
	case goType == "bool":
		return "true or false"
	case goType == "string":
		return "a string"
	}
	return "a " + goType
}

// locate gives each fieldError of err (as Validate returns them) the file and the line
// of its field; other errors are returned as they are.
func locate(file string, err error, pos *positions) error {
	errs := splitJoined(err)
	for i, e := range errs {
		var fe *fieldError
		if errors.As(e, &fe) {
			c := *fe
			c.file = file
			if c.line == 0 && pos != nil {
				c.line = pos.lineOf(c.path)
			}
			errs[i] = &c
		}
	}
	return errors.Join(errs...)
}

// splitJoined is a copy of the errors errors.Join joined into err, or err alone.
func splitJoined(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return slices.Clone(j.Unwrap())
	}
	return []error{err}
}

var leadingPath = regexp.MustCompile(`^([a-z_]+(?:\[\d+\])?(?:\.[a-z_]+(?:\[\d+\])?)*): (.*)$`)

// Locate words err, a check of this config's contents (by a service, of its part), as
// the config's own mistakes: each of its errors names the file, and the line of the
// field it begins with ("tokens[1].token: must be at least 16 characters" becomes
// "gw.yaml:9: tokens[1].token: ..."). Each wraps ErrInvalid.
func (c Config) Locate(err error) error {
	if err == nil || c.Path == "" {
		return err
	}
	errs := splitJoined(err)
	for i, e := range errs {
		var fe *fieldError
		switch g := leadingPath.FindStringSubmatch(e.Error()); {
		case errors.As(e, &fe):
		case g != nil:
			errs[i] = &fieldError{path: g[1], msg: g[2]}
		default:
			errs[i] = &fieldError{msg: e.Error()}
		}
	}
	return locate(c.Path, errors.Join(errs...), c.pos)
}
