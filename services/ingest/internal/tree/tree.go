// Package tree is a document tree with positions, read from JSON or YAML, so the v3
// decoder can report every problem at its line and column whichever syntax was used. It
// refuses what makes a document dangerous or ambiguous before any decoding starts:
// excessive depth, duplicate keys, YAML anchors, aliases and custom tags.
package tree

import "fmt"

// Kind is the type of a node.
type Kind uint8

// Node kinds.
const (
	Null Kind = iota
	Bool
	Number
	String
	Array
	Object
)

func (k Kind) String() string {
	return [...]string{"null", "a boolean", "a number", "a string", "a list", "an object"}[k]
}

// MaxDepth bounds nesting of lists and objects.
const MaxDepth = 64

// Node is one value. Text holds a string's value, a number's literal (decimal) or
// "true"/"false".
type Node struct {
	Kind Kind
	// Plain marks an unquoted YAML scalar YAML typed as a number or boolean; Raw is its
	// text as written. A string attribute accepts it (os_release: 7.2 means "7.2").
	Plain  bool
	Raw    string
	Line   int
	Col    int
	Text   string
	Items  []*Node
	Fields []Field
}

// Field is one key of an object, at the key's position.
type Field struct {
	Key   string
	Line  int
	Col   int
	Value *Node
}

// SyntaxError is a document that could not be read at all.
type SyntaxError struct {
	Line, Col int
	What      string
}

func (e *SyntaxError) Error() string { return fmt.Sprintf("%d:%d: %s", e.Line, e.Col, e.What) }
