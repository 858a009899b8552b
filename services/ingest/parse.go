package ingest

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"path"
	"sort"
	"strings"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/services/ingest/dds"
	"github.com/gridwire/gridwire/services/ingest/internal/diag"
	"github.com/gridwire/gridwire/services/ingest/internal/tree"
	"github.com/gridwire/gridwire/services/ingest/internal/xmltree"
	"github.com/gridwire/gridwire/services/ingest/jrdl"
	"github.com/gridwire/gridwire/services/ingest/jsdl"
	"github.com/gridwire/gridwire/services/ingest/ptpsubmit"
	"github.com/gridwire/gridwire/services/ingest/taskdesc"
)

// Format names, as ParseOptions.Format and Original.Format spell them.
const (
	FormatV3JSON = "v3-json"
	FormatV3YAML = "v3-yaml"
	FormatJRDL   = "jrdl"
	FormatDDS    = "dds"
	FormatJSDL   = "jsdl"
	// FormatPTP is the attribute list of a PTP SUBMIT_JOB command, as a JSON list of
	// "key=value" strings; the PTP endpoint names it, it is never detected.
	FormatPTP = "ptp-submit"
)

// MaxTaskDescriptionBytes caps a v3 task description (JSON or YAML), which describes one
// job: far below MaxDocumentBytes, since a document tree costs many times its text.
const MaxTaskDescriptionBytes = 1 << 20

// Formats lists every format Parse reads.
var Formats = []string{FormatV3JSON, FormatV3YAML, FormatJRDL, FormatDDS, FormatJSDL, FormatPTP}

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

// Parse reads one document into canonical jobs, without IDs (the caller assigns them).
// A document that makes several jobs (a JRDL document with several jobs or with
// subjobs, any DDS topology) yields a parent record first (Kind events.KindGroup, holding
// Original.Bytes) and then its children in document order, each with Original.Index its
// position in the returned slice and Parent left for the caller to fill. A document that
// makes one job yields that job alone, holding Original.Bytes.
//
// Values only the target knows ({taskid}, {queue}, {lrms} of v3, JRDL's reserved
// substitution names, DDS's session) stay as {name} placeholders, listed in each job's
// Substitutions; the incarnator fills them with events.Job.Substitute.
//
// Every problem found is returned in one *ParseError. Parse appends nothing, touches no
// state, and returns the same jobs for the same input.
func Parse(file string, data []byte, opts ParseOptions) (jobs []events.Job, err error) {
	defer func() {
		if r := recover(); r != nil {
			jobs, err = nil, single(file, "(document)", fmt.Sprintf("the reader failed on this input (%v); please report it", r))
		}
	}()
	if len(data) > MaxDocumentBytes {
		return nil, single(file, "(document)", fmt.Sprintf("is %d bytes, more than the limit of %d", len(data), MaxDocumentBytes))
	}
	format := opts.Format
	if format == "" {
		if format, err = Detect(data, opts.ContentType); err != nil {
			return nil, single(file, "(format)", err.Error())
		}
	}
	jobs, problems := parseAs(format, data)
	if problems != nil {
		return nil, withFile(file, problems)
	}
	stamp(jobs, file, data, format, opts.ContentType)
	if format == FormatJRDL && jobs[0].Kind == events.KindGroup {
		// A JRDL document has no name of its own: its parent record takes its file's,
		// so that a list of documents tells them apart.
		if name := documentName(file); name != "" {
			jobs[0].Name = name
		}
	}
	return jobs, nil
}

// documentName is the base name of a description's file, or "" for the placeholders
// callers give a document that came without one ("(request body)", "<stdin>").
func documentName(file string) string {
	if file == "" || strings.HasPrefix(file, "(") || strings.HasPrefix(file, "<") {
		return ""
	}
	return path.Base(file)
}

func parseAs(format string, data []byte) ([]events.Job, []diag.Problem) {
	switch format {
	case FormatV3JSON, FormatV3YAML:
		if len(data) > MaxTaskDescriptionBytes {
			return nil, []diag.Problem{{Line: 1, Col: 1, Field: "(document)",
				What: fmt.Sprintf("is %d bytes; a v3 task description may have at most %d", len(data), MaxTaskDescriptionBytes)}}
		}
		read := tree.ParseJSON
		if format == FormatV3YAML {
			read = tree.ParseYAML
		}
		root, err := read(data)
		if err != nil {
			return nil, syntaxProblem(err)
		}
		job, problems := taskdesc.Decode(root)
		if problems != nil {
			return nil, problems
		}
		return []events.Job{job}, nil
	case FormatPTP:
		root, err := tree.ParseJSON(data)
		if err != nil {
			return nil, syntaxProblem(err)
		}
		job, problems := ptpsubmit.Decode(root)
		if problems != nil {
			return nil, problems
		}
		return []events.Job{job}, nil
	case FormatJRDL, FormatDDS, FormatJSDL:
		root, err := xmltree.Parse(data)
		if err != nil {
			return nil, syntaxProblem(err)
		}
		switch format {
		case FormatJRDL:
			return jrdl.Decode(root)
		case FormatJSDL:
			return jsdl.Decode(root)
		}
		return dds.Decode(root)
	}
	return nil, []diag.Problem{{Line: 1, Col: 1, Field: "(format)",
		What: fmt.Sprintf("unknown format %q (one of %s)", format, strings.Join(Formats, ", "))}}
}

// syntaxProblem turns a reader's error into a problem at its position.
func syntaxProblem(err error) []diag.Problem {
	p := diag.Problem{Line: 1, Col: 1, Field: "(syntax)", What: err.Error()}
	var te *tree.SyntaxError
	var xe *xmltree.SyntaxError
	switch {
	case errors.As(err, &te):
		p.Line, p.Col, p.What = te.Line, te.Col, te.What
	case errors.As(err, &xe):
		p.Line, p.Col, p.What = xe.Line, xe.Col, xe.What
	}
	return []diag.Problem{p}
}

// stamp records the original document on the first job and its place on every other.
func stamp(jobs []events.Job, file string, data []byte, format, contentType string) {
	sum := sha256.Sum256(data)
	digest := hex.EncodeToString(sum[:])
	for i := range jobs {
		o := &jobs[i].Original
		o.Format, o.ContentType, o.File, o.SHA256 = format, contentType, file, digest
		if i == 0 {
			o.Bytes = append([]byte(nil), data...)
		} else {
			o.Index = i
		}
	}
}

func single(file, field, what string) *ParseError {
	return &ParseError{[]Problem{{File: file, Line: 1, Col: 1, Field: field, What: what}}}
}

func withFile(file string, problems []diag.Problem) *ParseError {
	out := make([]Problem, len(problems))
	for i, p := range problems {
		out[i] = Problem{File: file, Line: p.Line, Col: p.Col, Field: p.Field, What: p.What}
	}
	sort.SliceStable(out, func(i, j int) bool {
		return out[i].Line < out[j].Line || out[i].Line == out[j].Line && out[i].Col < out[j].Col
	})
	return &ParseError{out}
}
