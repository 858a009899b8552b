package ingest

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/gridwire/gridwire/events"
)

// memStore is an in-memory Store: it keeps what Create is given.
type memStore struct{ created []events.Event }

func (m *memStore) Create(_ context.Context, e events.Event) (uint64, error) {
	m.created = append(m.created, e)
	return uint64(len(m.created)), nil
}

func canonicalOf(t *testing.T, doc string, edit func([]events.Job)) []byte {
	t.Helper()
	jobs, err := Parse("job.json", []byte(doc), ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	edit(jobs)
	b, err := json.Marshal(jobs)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestCanonicalSubmissionMustMatchItsOriginal(t *testing.T) {
	doc := `{"version":3,"executable":"/bin/cat","arguments":["in.txt"],"input_files":{"in.txt":"data/in.txt"}}`
	store := &memStore{}
	svc, err := New(Config{}, Deps{Store: store})
	if err != nil {
		t.Fatal(err)
	}
	submit := func(body []byte) error {
		_, err := svc.Submit(context.Background(), Submission{File: "canonical.json", Data: body, Format: FormatCanonical})
		return err
	}
	uploaded := canonicalOf(t, doc, func(j []events.Job) {
		j[0].StageIn[0].From = events.SchemeUpload + "://01J00000000000000000000000/in.txt"
	})
	if err := submit(uploaded); err != nil {
		t.Fatalf("inputs renamed to uploads were refused: %v", err)
	}
	if len(store.created) != 1 {
		t.Fatalf("%d events created, want 1", len(store.created))
	}
	for name, edit := range map[string]func([]events.Job){
		"another program":            func(j []events.Job) { j[0].Executable = "/bin/rm" },
		"an extra argument":          func(j []events.Job) { j[0].Arguments = append(j[0].Arguments, "-rf") },
		"an input renamed elsewhere": func(j []events.Job) { j[0].StageIn[0].From = "https://evil.example/x" },
		"an extra job":               func(j []events.Job) {},
	} {
		body := canonicalOf(t, doc, edit)
		if name == "an extra job" {
			var jobs []events.Job
			_ = json.Unmarshal(body, &jobs)
			body, _ = json.Marshal(append(jobs, jobs[0]))
		}
		if err := submit(body); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want a refusal", name, err)
		}
	}
	if len(store.created) != 1 {
		t.Fatalf("a refused canonical submission created events: %d", len(store.created))
	}
	if err := submit([]byte("[\n  {\"executable\": 3}\n]")); err == nil || !errors.Is(err, ErrInvalid) {
		t.Fatalf("malformed canonical JSON: %v", err)
	} else if pe := (*ParseError)(nil); errors.As(err, &pe) && pe.Problems[0].Line != 2 {
		t.Errorf("malformed canonical JSON placed at line %d, want 2", pe.Problems[0].Line)
	}
}
