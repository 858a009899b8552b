// Package xmltree reads an XML document into a small element tree with positions, for the
// JRDL and DDS readers. It refuses document type declarations (and with them entity
// expansion), nesting past MaxDepth and anything after the root element; names are local
// (namespaces are checked by the readers if they care).
package xmltree

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strings"
)

// MaxDepth bounds element nesting.
const MaxDepth = 64

// MaxElements bounds the elements of one document, so that a document of many tiny
// elements cannot make a tree many times its own size.
const MaxElements = 500_000

// Element is one element with its attributes, children and text.
type Element struct {
	Name     string
	Space    string
	Attrs    []Attr
	Children []*Element
	// Text is the element's character data, concatenated, comments left out.
	Text string
	Line int
	Col  int
}

// Attr is one attribute (local name).
type Attr struct {
	Name  string
	Space string
	Value string
}

// Attr returns the value of the attribute with that local name, and whether it is there.
func (e *Element) Attr(name string) (string, bool) {
	for _, a := range e.Attrs {
		if a.Name == name && a.Space == "" {
			return a.Value, true
		}
	}
	return "", false
}

// SyntaxError is a document that could not be read.
type SyntaxError struct {
	Line, Col int
	What      string
}

func (e *SyntaxError) Error() string { return fmt.Sprintf("%d:%d: %s", e.Line, e.Col, e.What) }

// Parse reads a whole document.
func Parse(data []byte) (*Element, error) {
	dec := xml.NewDecoder(bytes.NewReader(data))
	dec.Strict = true
	var root *Element
	var stack []*Element
	var text [][]byte
	elements := 0
	for {
		line, col := position(dec)
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, syntaxError(dec, err)
		}
		switch t := tok.(type) {
		case xml.StartElement:
			if root != nil && len(stack) == 0 {
				return nil, &SyntaxError{line, col, "a second root element <" + t.Name.Local + ">"}
			}
			if elements++; elements > MaxElements {
				return nil, &SyntaxError{line, col, fmt.Sprintf("more than %d elements", MaxElements)}
			}
			if len(stack) >= MaxDepth {
				return nil, &SyntaxError{line, col, fmt.Sprintf("elements nested deeper than %d levels", MaxDepth)}
			}
			el := &Element{Name: t.Name.Local, Space: t.Name.Space, Line: line, Col: col}
			for _, a := range t.Attr {
				el.Attrs = append(el.Attrs, Attr{Name: a.Name.Local, Space: a.Name.Space, Value: a.Value})
			}
			if len(stack) == 0 {
				root = el
			} else {
				parent := stack[len(stack)-1]
				parent.Children = append(parent.Children, el)
			}
			stack = append(stack, el)
			text = append(text, nil)
		case xml.EndElement:
			el := stack[len(stack)-1]
			el.Text = string(text[len(text)-1])
			stack, text = stack[:len(stack)-1], text[:len(text)-1]
		case xml.CharData:
			if len(stack) > 0 {
				text[len(text)-1] = append(text[len(text)-1], t...)
			} else if len(bytes.TrimSpace(t)) > 0 {
				return nil, &SyntaxError{line, col, "text outside the root element"}
			}
		case xml.Directive:
			what := "<!" + firstWord(t) + " is not accepted (no document type declarations or entities)"
			return nil, &SyntaxError{line, col, what}
		}
	}
	if root == nil {
		return nil, &SyntaxError{1, 1, "no root element"}
	}
	return root, nil
}

func firstWord(b []byte) string {
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return ""
	}
	if len(f[0]) > 20 {
		return f[0][:20]
	}
	return f[0]
}

// position is the decoder's position, 1-based in both parts (InputPos gives column 0
// just after a newline).
func position(dec *xml.Decoder) (int, int) {
	line, col := dec.InputPos()
	return max(line, 1), max(col, 1)
}

func syntaxError(dec *xml.Decoder, err error) *SyntaxError {
	line, col := position(dec)
	var se *xml.SyntaxError
	if errors.As(err, &se) {
		return &SyntaxError{line, col, se.Msg}
	}
	return &SyntaxError{line, col, strings.TrimPrefix(err.Error(), "xml: ")}
}

// RootName returns the local name of the root element without reading the rest.
func RootName(data []byte) (string, error) {
	dec := xml.NewDecoder(bytes.NewReader(data))
	for {
		tok, err := dec.Token()
		if err != nil {
			return "", err
		}
		switch t := tok.(type) {
		case xml.StartElement:
			return t.Name.Local, nil
		}
	}
}
