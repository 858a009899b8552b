package ingest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/gridwire/gridwire/events"
)

// FormatCanonical is a JSON array of canonical jobs, as `gridwire normalize` prints
// them, whose first job carries the original description. `gridwire submit` uses it
// after uploading the description's local input files: the jobs are the original's,
// with those inputs renamed to gridwire-upload URLs.
const FormatCanonical = "canonical"

// parseCanonical accepts canonical jobs only if they are what the original description
// they carry parses to, but for inputs renamed to uploads: a client cannot hand in jobs
// its description does not say.
func parseCanonical(sub Submission) ([]events.Job, error) {
	var jobs []events.Job
	dec := json.NewDecoder(bytes.NewReader(sub.Data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&jobs); err != nil {
		return nil, &ParseError{[]Problem{jsonProblem(sub.File, sub.Data, err)}}
	}
	if len(jobs) == 0 || len(jobs[0].Original.Bytes) == 0 || jobs[0].Original.Format == FormatCanonical {
		return nil, problem(sub.File, "original", "canonical jobs must carry the original description")
	}
	orig := jobs[0].Original
	want, err := Parse(orig.File, orig.Bytes, ParseOptions{Format: orig.Format, ContentType: orig.ContentType})
	if err != nil {
		return nil, err
	}
	if len(want) != len(jobs) {
		return nil, problem(sub.File, "(document)", fmt.Sprintf("%d jobs given, the original description makes %d", len(jobs), len(want)))
	}
	for i := range jobs {
		if err := sameAsOriginal(jobs[i], want[i]); err != nil {
			return nil, problem(sub.File, fmt.Sprintf("[%d]", i), err.Error())
		}
	}
	return jobs, nil
}

// sameAsOriginal compares a submitted job with the original's, after putting back the
// local names of inputs that were uploaded.
func sameAsOriginal(got, want events.Job) error {
	if len(got.StageIn) != len(want.StageIn) {
		return errors.New("stage-in list differs from the original description's")
	}
	got.StageIn = append([]events.FileCopy(nil), got.StageIn...)
	for k := range got.StageIn {
		if isUpload(got.StageIn[k].From) {
			got.StageIn[k].From, got.StageIn[k].Directory = want.StageIn[k].From, want.StageIn[k].Directory
		}
	}
	if isUpload(got.Stdin) {
		got.Stdin = want.Stdin
	}
	a, _ := json.Marshal(got)
	b, _ := json.Marshal(want)
	if !bytes.Equal(a, b) {
		return errors.New("the job differs from what the original description says")
	}
	return nil
}

func isUpload(s string) bool { return strings.HasPrefix(s, events.SchemeUpload+"://") }

func problem(file, field, what string) *ParseError {
	return &ParseError{[]Problem{{File: file, Line: 1, Col: 1, Field: field, What: what}}}
}

// jsonProblem places a JSON decoding error at its line and column.
func jsonProblem(file string, data []byte, err error) Problem {
	var off int64
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		off = se.Offset
	case errors.As(err, &te):
		off = te.Offset
	}
	line, col := 1, 1
	for i := int64(0); i < off && i < int64(len(data)); i++ {
		if data[i] == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
	}
	return Problem{File: file, Line: line, Col: col, Field: "(document)", What: err.Error()}
}
