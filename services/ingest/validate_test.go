package ingest

import (
	"errors"
	"strings"
	"testing"

	"github.com/gridwire/gridwire/events"
)

// NUL bytes in arguments, the executable or the environment were accepted at submit and
// failed later in the incarnator; they are refused at submission now, naming the field,
// as are control characters in names of files and variables. Other characters in
// arguments and values are a quoted shell word's to carry, and pass.
func TestSubmitRefusesNULAndControlCharacters(t *testing.T) {
	s, err := New(Config{}, Deps{Store: &memStore{}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ doc, field string }{
		{`{"version":3,"executable":"/bin/echo","arguments":["a\u0000b"]}`, "arguments[0]"},
		{`{"version":3,"executable":"/bin/ec\u0000ho"}`, "executable"},
		{`{"version":3,"executable":"/bin/echo","environment":{"x":"1\u0000"}}`, "environment[0].value"},
		{`{"version":3,"executable":"/bin/echo","stdout":"out\u001b[2J"}`, "stdout[0]"},
		{`{"version":3,"executable":"/bin/ech\no"}`, "executable"},
		{`{"version":3,"executable":"/bin/echo","input_files":{"a\u0007":"http://h/x"}}`, "stage_in[0].to"},
	} {
		_, err := s.Submit(t.Context(), Submission{File: "job.json", Data: []byte(c.doc)})
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.field) {
			t.Errorf("%s: %v, want a refusal naming %s", c.doc, err, c.field)
		}
	}
	ok := `{"version":3,"executable":"/bin/echo","arguments":["tab\there","line\nbreak","\u001b[31mred"],"environment":{"x":"a\nb"}}`
	if _, err := s.Submit(t.Context(), Submission{File: "job.json", Data: []byte(ok)}); err != nil {
		t.Errorf("control characters in arguments and values: %v", err)
	}
	if err := validateJob(&events.Job{Fields: map[string]string{"F\x00": "v"}}, &fieldCache{}); err == nil || !strings.Contains(err.Error(), "fields key") {
		t.Errorf("a NUL in a field name: %v", err)
	}
}
