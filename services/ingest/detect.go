package ingest

import (
	"bytes"
	"errors"
	"fmt"
	"mime"
	"strings"

	"github.com/gridwire/gridwire/services/ingest/internal/tree"
	"github.com/gridwire/gridwire/services/ingest/internal/xmltree"
	"github.com/gridwire/gridwire/services/ingest/jsdl"
)

// ErrUnknownFormat is wrapped when Detect cannot tell a document's language.
var ErrUnknownFormat = errors.New("cannot tell the format")

// v3Keys are top-level keys that mark a YAML document as a v3 task description.
var v3Keys = map[string]bool{"version": true, "executable": true, "arguments": true,
	"environment": true, "requirements": true, "input_files": true, "output_files": true}

// Detect names the format of a document: from its content type when that says JSON or
// YAML, from the root element for XML (jrdl → "jrdl", topology → "dds",
// JobDefinition → "jsdl"), else from its
// first bytes and, for YAML, its top-level keys.
func Detect(data []byte, contentType string) (string, error) {
	if len(data) > MaxDocumentBytes {
		return "", fmt.Errorf("%w: document is larger than %d bytes", ErrUnknownFormat, MaxDocumentBytes)
	}
	switch kind := mediaKind(contentType); kind {
	case "json":
		return FormatV3JSON, nil
	case "yaml":
		return FormatV3YAML, nil
	case "xml":
		return xmlFormat(data)
	}
	body := bytes.TrimLeft(bytes.TrimPrefix(data, []byte("\xef\xbb\xbf")), " \t\r\n")
	switch {
	case len(body) == 0:
		return "", fmt.Errorf("%w: the document is empty", ErrUnknownFormat)
	case body[0] == '<':
		return xmlFormat(data)
	case body[0] == '{' || body[0] == '[':
		return FormatV3JSON, nil
	}
	if len(data) > MaxTaskDescriptionBytes {
		return FormatV3YAML, nil // too big to read twice; Parse refuses it by size
	}
	root, err := tree.ParseYAML(data)
	if err != nil {
		// Neither XML nor JSON: YAML is all that is left, so let its reader say what is
		// wrong, at the position.
		return FormatV3YAML, nil
	}
	if root.Kind == tree.Object {
		for _, f := range root.Fields {
			if v3Keys[f.Key] {
				return FormatV3YAML, nil
			}
		}
	}
	return "", fmt.Errorf("%w: YAML without any key of a v3 task description; name the format", ErrUnknownFormat)
}

// mediaKind reduces a content type to json, yaml, xml or "".
func mediaKind(contentType string) string {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return ""
	}
	sub := mt[strings.IndexByte(mt, '/')+1:]
	if i := strings.LastIndexByte(sub, '+'); i >= 0 {
		sub = sub[i+1:]
	}
	switch sub {
	case "json":
		return "json"
	case "yaml", "x-yaml":
		return "yaml"
	case "xml":
		return "xml"
	}
	return ""
}

func xmlFormat(data []byte) (string, error) {
	name, err := xmltree.RootName(data)
	if err != nil {
		return "", fmt.Errorf("%w: XML without a readable root element (%v)", ErrUnknownFormat, err)
	}
	switch name {
	case "jrdl":
		return FormatJRDL, nil
	case "topology":
		return FormatDDS, nil
	case jsdl.Root:
		return FormatJSDL, nil // the reader checks the namespace, at its position
	}
	return "", fmt.Errorf("%w: XML root element <%s> is neither <jrdl>, <topology> nor <JobDefinition> (JSDL)", ErrUnknownFormat, name)
}
