package ingest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/gridwire/gridwire/events"
)

// ParseOptions say how to read one document.
type ParseOptions struct {
	Format      string // force a format ("v3-json", ...); empty: detect
	ContentType string // the submitter's content type, a detection hint
}

// Problem is one thing wrong with a document, at a position.
type Problem struct {
	File  string `json:"file"`
	Line  int    `json:"line"`
	Col   int    `json:"col"`
	Field string `json:"field"`
	What  string `json:"what"`
}

func (p Problem) String() string {
	return fmt.Sprintf("%s:%d:%d: %s: %s", p.File, p.Line, p.Col, p.Field, p.What)
}

// ErrInvalid is wrapped by every rejection of a document.
var ErrInvalid = errors.New("ingest: invalid job description")

// ParseError lists every problem found in one document.
type ParseError struct{ Problems []Problem }

func (e *ParseError) Error() string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = p.String()
	}
	return strings.Join(lines, "\n")
}

// Unwrap makes errors.Is(err, ErrInvalid) hold.
func (e *ParseError) Unwrap() error { return ErrInvalid }

// Parse reads one document into canonical jobs, without IDs (Submit assigns them; a
// parent record, when there is one, comes first and its children name it by index).
// It appends nothing and touches no state.
//
// This is the foundation's minimum: a v3 task description in JSON. The ingest issue
// replaces it with every language of the specs.
func Parse(file string, data []byte, opts ParseOptions) ([]events.Job, error) {
	var doc struct {
		Version     int               `json:"version"`
		Description string            `json:"description"`
		Executable  string            `json:"executable"`
		Arguments   []string          `json:"arguments"`
		Environment map[string]string `json:"environment"`
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		return nil, &ParseError{[]Problem{{File: file, Line: 1, Col: 1, Field: "(document)", What: err.Error()}}}
	}
	if doc.Executable == "" {
		return nil, &ParseError{[]Problem{{File: file, Line: 1, Col: 1, Field: "executable", What: "missing"}}}
	}
	j := events.Job{Name: doc.Description, Executable: doc.Executable, Arguments: doc.Arguments}
	for _, k := range sortedKeys(doc.Environment) {
		j.Environment = append(j.Environment, events.EnvVar{Name: strings.ToUpper(k), Value: doc.Environment[k]})
	}
	sum := sha256.Sum256(data)
	j.Original = events.Original{Format: "v3-json", ContentType: opts.ContentType, File: file,
		SHA256: hex.EncodeToString(sum[:]), Bytes: data}
	return []events.Job{j}, nil
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	for i := 1; i < len(keys); i++ {
		for j := i; j > 0 && keys[j] < keys[j-1]; j-- {
			keys[j], keys[j-1] = keys[j-1], keys[j]
		}
	}
	return keys
}
