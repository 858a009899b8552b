package eventstest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/gridwire/gridwire/events"
)

// ReplayDir is where the replay fixtures of layout version 1 live, relative to the
// events module. Each fixture NAME is three files:
//
//	NAME.jsonl      the recorded slice of the JOBS stream, one stored message a line:
//	                {"seq":N,"subject":"jobs.<id>.<event>.<route>","event":{...}}
//	                where "event" is the CloudEvent body byte for byte as it was stored
//	                (its SHA-256 is the chain hash the next event names);
//	NAME.state.json the State every job of the slice folded to in the live system, by ID;
//	NAME.trail.json every job's state after each of its events, by ID: one line per
//	                event, "SEQ EVENT STATUS", the exit code and native state, and the
//	                flags then up (see Trail), so a fold that goes wrong and right again
//	                is still seen;
//	NAME.row.json   the job-table projection row of every job, by ID, as the live
//	                projector wrote it.
const ReplayDir = "testdata/replay/v1"

// Stored is one message of the stream as it was stored.
type Stored struct {
	Seq     uint64          `json:"seq"`
	Subject string          `json:"subject"`
	Body    json.RawMessage `json:"event"`
}

// Fixture is one recorded history: the stream's messages and what each job folds to.
type Fixture struct {
	Name   string
	Stored []Stored
	Events []events.Event          // Stored decoded, with Seq, Subject, Route and Hash
	States map[string]events.State // the fold of each job, by job ID
	Trails map[string][]string     // each job's state after each event (Trail), by job ID
	Rows   map[string]events.State // the projection row of each job, by job ID
}

// Jobs returns the fixture's job IDs in the order of their first event.
func (f Fixture) Jobs() []string {
	var ids []string
	seen := map[string]bool{}
	for _, e := range f.Events {
		if !seen[e.JobID] {
			seen[e.JobID] = true
			ids = append(ids, e.JobID)
		}
	}
	return ids
}

// History returns one job's events in stream order.
func (f Fixture) History(id string) []events.Event {
	var out []events.Event
	for _, e := range f.Events {
		if e.JobID == id {
			out = append(out, e)
		}
	}
	return out
}

// LoadFixtures reads every fixture in dir, sorted by name. A directory with no
// fixture is an error: a test that replays nothing must not pass.
func LoadFixtures(dir string) ([]Fixture, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	if err != nil {
		return nil, err
	}
	if len(paths) == 0 {
		return nil, fmt.Errorf("no replay fixtures (*.jsonl) in %s", dir)
	}
	sort.Strings(paths)
	out := make([]Fixture, 0, len(paths))
	for _, p := range paths {
		f, err := LoadFixture(dir, strings.TrimSuffix(filepath.Base(p), ".jsonl"))
		if err != nil {
			return nil, err
		}
		out = append(out, f)
	}
	return out, nil
}

// LoadFixture reads one fixture's three files and decodes its events as the store
// decodes what it reads from the stream.
func LoadFixture(dir, name string) (Fixture, error) {
	f := Fixture{Name: name}
	var err error
	base := filepath.Join(dir, name)
	if f.Stored, err = readStored(base + ".jsonl"); err != nil {
		return f, err
	}
	if err := f.Decode(); err != nil {
		return f, fmt.Errorf("%s.jsonl: %w", base, err)
	}
	if err := readJSON(base+".state.json", &f.States); err != nil {
		return f, err
	}
	if err := readJSON(base+".trail.json", &f.Trails); err != nil {
		return f, err
	}
	if err := readJSON(base+".row.json", &f.Rows); err != nil {
		return f, err
	}
	return f, nil
}

// Trail folds a job's history with apply and describes the state after each event in
// one line: "SEQ EVENT STATUS", then "exit=N" and "native=STATE" when known, and
// "+unknown", "+cancel", "+hold" and "+resume" for the flags that are up. It stops at
// the first event apply refuses.
func Trail(history []events.Event, apply func(events.State, events.Event) (events.State, error)) ([]string, error) {
	var st events.State
	out := make([]string, 0, len(history))
	for _, e := range history {
		var err error
		if st, err = apply(st, e); err != nil {
			return out, fmt.Errorf("event %d (%s): %w", e.Seq, e.Name, err)
		}
		line := fmt.Sprintf("%d %s %s", e.Seq, e.Name, st.Status)
		if st.ExitCode != nil {
			line += fmt.Sprintf(" exit=%d", *st.ExitCode)
		}
		if st.NativeState != "" {
			line += " native=" + st.NativeState
		}
		for _, f := range []struct {
			up   bool
			name string
		}{{st.StatusUnknown, "unknown"}, {st.CancelRequested, "cancel"}, {st.HoldRequested, "hold"}, {st.ResumeRequested, "resume"}} {
			if f.up {
				line += " +" + f.name
			}
		}
		out = append(out, line)
	}
	return out, nil
}

// Decode sets Events from Stored.
func (f *Fixture) Decode() error {
	f.Events = make([]events.Event, 0, len(f.Stored))
	for i, s := range f.Stored {
		e, err := decodeStored(s)
		if err != nil {
			return fmt.Errorf("message %d (line %d): %w", s.Seq, i+1, err)
		}
		f.Events = append(f.Events, e)
	}
	return nil
}

func readStored(path string) ([]Stored, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []Stored
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 64<<20)
	for line := 1; sc.Scan(); line++ {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		var s Stored
		dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&s); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, line, err)
		}
		if s.Seq == 0 || s.Subject == "" || len(s.Body) == 0 {
			return nil, fmt.Errorf("%s:%d: seq, subject and event are required", path, line)
		}
		out = append(out, s)
	}
	return out, sc.Err()
}

// decodeStored is what a reader of the stream does with a message, plus the chain
// hash of its body; the subject must agree with the body.
func decodeStored(s Stored) (events.Event, error) {
	e, err := events.DecodeStored(s.Body, s.Subject, s.Seq)
	if err != nil {
		return e, err
	}
	id, name, _, err := events.ParseSubject(s.Subject)
	if err != nil {
		return e, err
	}
	if id != e.JobID || name != e.Name {
		return e, fmt.Errorf("subject %s does not match event %s of job %s", s.Subject, e.Name, e.JobID)
	}
	e.Hash = events.HashOf(s.Body)
	return e, nil
}

func readJSON(path string, v any) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// WriteFixture writes a fixture's files (all but Events, which are decoded from
// Stored) into dir. The bodies are written byte for byte, so their hashes, and the
// chain, survive.
func WriteFixture(dir string, f Fixture) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var b bytes.Buffer
	for _, s := range f.Stored {
		if !json.Valid(s.Body) || bytes.ContainsAny(s.Body, "\n") {
			return fmt.Errorf("%s: message %d is not one line of JSON", f.Name, s.Seq)
		}
		subject, _ := json.Marshal(s.Subject)
		fmt.Fprintf(&b, "{\"seq\":%d,\"subject\":%s,\"event\":%s}\n", s.Seq, subject, s.Body)
	}
	base := filepath.Join(dir, f.Name)
	if err := os.WriteFile(base+".jsonl", b.Bytes(), 0o644); err != nil {
		return err
	}
	if err := writeJSON(base+".state.json", f.States); err != nil {
		return err
	}
	if err := writeJSON(base+".trail.json", f.Trails); err != nil {
		return err
	}
	return writeJSON(base+".row.json", f.Rows)
}

func writeJSON(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o644)
}
