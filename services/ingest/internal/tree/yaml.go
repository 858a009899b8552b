package tree

import (
	"bytes"
	"errors"
	"io"
	"math/big"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// ParseYAML reads one YAML document with positions. Anchors, aliases, merge keys, custom
// tags, non-string keys, duplicate keys, several documents and nesting past MaxDepth are
// refused: a job description needs none of them, and they are how YAML bombs are made.
func ParseYAML(data []byte) (*Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, &SyntaxError{Line: 1, Col: 1, What: "empty document"}
		}
		return nil, yamlSyntaxError(err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		line := extra.Line
		if line == 0 {
			line = 1
		}
		return nil, &SyntaxError{Line: line, Col: 1, What: "more than one YAML document"}
	}
	if len(doc.Content) != 1 {
		return nil, &SyntaxError{Line: 1, Col: 1, What: "empty document"}
	}
	return fromYAML(doc.Content[0], 0)
}

var yamlLine = regexp.MustCompile(`^yaml: (?:line (\d+): )?(.*)$`)

func yamlSyntaxError(err error) *SyntaxError {
	msg := err.Error()
	line := 1
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		if m[1] != "" {
			line, _ = strconv.Atoi(m[1])
		}
		msg = m[2]
	}
	return &SyntaxError{Line: line, Col: 1, What: msg}
}

func fromYAML(y *yaml.Node, depth int) (*Node, error) {
	at := func(what string) error { return &SyntaxError{Line: y.Line, Col: y.Column, What: what} }
	if depth > MaxDepth {
		return nil, at("nested deeper than " + strconv.Itoa(MaxDepth) + " levels")
	}
	if y.Kind == yaml.AliasNode {
		return nil, at("YAML aliases are not accepted")
	}
	if y.Anchor != "" {
		return nil, at("YAML anchors are not accepted")
	}
	n := &Node{Line: y.Line, Col: y.Column}
	switch y.Kind {
	case yaml.MappingNode:
		return n, yamlMapping(n, y, depth)
	case yaml.SequenceNode:
		if y.Tag != "!!seq" {
			return nil, at("YAML tag " + y.Tag + " is not accepted")
		}
		n.Kind = Array
		for _, c := range y.Content {
			item, err := fromYAML(c, depth+1)
			if err != nil {
				return nil, err
			}
			n.Items = append(n.Items, item)
		}
		return n, nil
	case yaml.ScalarNode:
		return n, yamlScalar(n, y)
	}
	return nil, at("unsupported YAML node")
}

func yamlMapping(n *Node, y *yaml.Node, depth int) error {
	if y.Tag != "!!map" {
		return &SyntaxError{Line: y.Line, Col: y.Column, What: "YAML tag " + y.Tag + " is not accepted"}
	}
	n.Kind = Object
	seen := make(map[string]struct{}, len(y.Content)/2)
	for i := 0; i+1 < len(y.Content); i += 2 {
		k := y.Content[i]
		if k.Kind != yaml.ScalarNode || k.Tag == "!!merge" {
			return &SyntaxError{Line: k.Line, Col: k.Column, What: "keys must be plain strings (no merge keys, lists or maps)"}
		}
		if k.Anchor != "" {
			return &SyntaxError{Line: k.Line, Col: k.Column, What: "YAML anchors are not accepted"}
		}
		if _, dup := seen[k.Value]; dup {
			return &SyntaxError{Line: k.Line, Col: k.Column, What: "duplicate key " + strconv.Quote(k.Value)}
		}
		seen[k.Value] = struct{}{}
		v, err := fromYAML(y.Content[i+1], depth+1)
		if err != nil {
			return err
		}
		n.Fields = append(n.Fields, Field{Key: k.Value, Line: k.Line, Col: k.Column, Value: v})
	}
	return nil
}

func yamlScalar(n *Node, y *yaml.Node) error {
	n.Text = y.Value
	if y.Style == 0 && (y.Tag == "!!int" || y.Tag == "!!float" || y.Tag == "!!bool") {
		n.Plain, n.Raw = true, y.Value
	}
	switch y.Tag {
	case "!!str":
		n.Kind = String
	case "!!null":
		n.Kind, n.Text = Null, "null"
	case "!!bool":
		n.Kind, n.Text = Bool, strings.ToLower(y.Value)
	case "!!int":
		n.Kind = Number
		n.Text = yamlInt(y.Value)
	case "!!float":
		n.Kind = Number
	default:
		return &SyntaxError{Line: y.Line, Col: y.Column, What: "YAML tag " + y.Tag + " is not accepted"}
	}
	return nil
}

// yamlInt turns YAML's integer spellings (0x1F, 0o17, +5, 1_000) into decimal text.
func yamlInt(s string) string {
	v, ok := new(big.Int).SetString(strings.ReplaceAll(s, "_", ""), 0)
	if !ok {
		return s
	}
	return v.String()
}
