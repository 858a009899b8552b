package profile

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
)

// Pos is a place in a profile file.
type Pos struct {
	File string
	Line int
	Col  int
}

func (p Pos) String() string {
	return fmt.Sprintf("%s:%d:%d", p.File, p.Line, p.Col)
}

// node is one XML element with the position of its start tag. Namespaces are ignored:
// profiles in the wild use osp:, idb: or no prefix for the same elements.
type node struct {
	name  string
	attrs []xml.Attr
	text  strings.Builder
	kids  []*node
	pos   Pos
}

func (n *node) attr(name string) (string, bool) {
	for _, a := range n.attrs {
		if a.Name.Local == name && a.Name.Space != "xmlns" {
			return a.Value, true
		}
	}
	return "", false
}

// lineIndex turns byte offsets into line and column numbers.
type lineIndex struct {
	file   string
	starts []int
}

func newLineIndex(file string, data []byte) lineIndex {
	starts := []int{0}
	for i, c := range data {
		if c == '\n' {
			starts = append(starts, i+1)
		}
	}
	return lineIndex{file: file, starts: starts}
}

func (li lineIndex) pos(off int64) Pos {
	i := sort.Search(len(li.starts), func(i int) bool { return int64(li.starts[i]) > off }) - 1
	return Pos{File: li.file, Line: i + 1, Col: int(off) - li.starts[i] + 1}
}

// parseTree reads the whole document into a tree of nodes.
func parseTree(file string, data []byte) (*node, error) {
	li := newLineIndex(file, data)
	dec := xml.NewDecoder(bytes.NewReader(data))
	dec.Strict = true
	var root *node
	var stack []*node
	for {
		off := dec.InputOffset()
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			var se *xml.SyntaxError
			if errors.As(err, &se) {
				return nil, &Error{Pos: Pos{File: file, Line: se.Line, Col: 1}, Msg: "XML: " + se.Msg}
			}
			return nil, &Error{Pos: li.pos(dec.InputOffset()), Msg: "XML: " + err.Error()}
		}
		switch t := tok.(type) {
		case xml.StartElement:
			n := &node{name: t.Name.Local, attrs: t.Attr, pos: li.pos(off)}
			if len(stack) > 0 {
				parent := stack[len(stack)-1]
				parent.kids = append(parent.kids, n)
			} else if root != nil {
				return nil, &Error{Pos: n.pos, Msg: "a second root element"}
			} else {
				root = n
			}
			stack = append(stack, n)
		case xml.EndElement:
			stack = stack[:len(stack)-1]
		case xml.CharData:
			if len(stack) > 0 {
				stack[len(stack)-1].text.Write(t)
			}
		}
	}
	if root == nil {
		return nil, &Error{Pos: Pos{File: file, Line: 1, Col: 1}, Msg: "no root element"}
	}
	return root, nil
}
