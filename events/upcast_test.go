package events_test

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/gridwire/gridwire/events"
)

func TestParseType(t *testing.T) {
	for _, c := range []struct {
		typ     string
		name    events.Name
		version int
		ok      bool
	}{
		{"dev.gridwire.job.exited.v1", events.Exited, 1, true},
		{"dev.gridwire.job.exited.v0", events.Exited, 0, true},
		{"dev.gridwire.job.status_changed.v12", events.StatusChanged, 12, true},
		{"dev.gridwire.job.exited", "", 0, false},
		{"dev.gridwire.job.exited.v", "", 0, false},
		{"dev.gridwire.job.exited.v01", "", 0, false},
		{"dev.gridwire.job.exited.v-1", "", 0, false},
		{"dev.gridwire.job..v1", "", 0, false},
		{"org.example.exited.v1", "", 0, false},
	} {
		name, version, ok := events.ParseType(c.typ)
		if name != c.name || version != c.version || ok != c.ok {
			t.Errorf("ParseType(%q) = %q, %d, %v; want %q, %d, %v", c.typ, name, version, ok, c.name, c.version, c.ok)
		}
	}
	for _, n := range events.Names() {
		if name, v, ok := events.ParseType(n.Type()); !ok || name != n || v != n.Version() {
			t.Errorf("ParseType(%s.Type()) = %q, %d, %v", n, name, v, ok)
		}
	}
}

// exitedV0 is a synthetic old schema of exited: the exit code was called "code" and the
// native state "lrms_state". Upcasting renames both.
var exitedV0 = events.Upcaster{Name: events.Exited, From: 0, Up: func(e events.Event) (json.RawMessage, error) {
	var old struct {
		Code      int    `json:"code"`
		LRMSState string `json:"lrms_state"`
	}
	if err := json.Unmarshal(e.Data, &old); err != nil {
		return nil, err
	}
	return json.Marshal(events.ExitedData{ExitCode: old.Code, NativeState: old.LRMSState})
}}

// An event at its current version goes through untouched: the identity path.
func TestUpcastIdentity(t *testing.T) {
	r, err := events.NewUpcasters(exitedV0)
	if err != nil {
		t.Fatal(err)
	}
	e, _ := events.New(events.NewID(), events.Exited, "", time.Now(), events.ExitedData{ExitCode: 3})
	got, err := r.Upcast(e, events.Exited.Version())
	if err != nil {
		t.Fatal(err)
	}
	if string(got.Data) != string(e.Data) || got.ID != e.ID || got.Name != e.Name {
		t.Errorf("current event changed: %s, want %s", got.Data, e.Data)
	}
	// The registry with no upcaster at all is the identity for every current event.
	empty, _ := events.NewUpcasters()
	if _, err := empty.Upcast(e, 1); err != nil {
		t.Errorf("empty registry: %v", err)
	}
}

// A synthetic v0 exited event, stored in the old shape, is decoded through the upcaster
// into today's payload and folds like a v1 event would.
func TestUpcastOldExitedEvent(t *testing.T) {
	r, err := events.NewUpcasters(exitedV0)
	if err != nil {
		t.Fatal(err)
	}
	id := events.NewID()
	body := []byte(`{"specversion":"1.0","id":"01M7Z0000000000000000000EX","source":"gridwire/watcher/old",` +
		`"type":"dev.gridwire.job.exited.v0","subject":"` + id + `","time":"2025-01-02T03:04:05Z",` +
		`"datacontenttype":"application/json","data":{"code":3,"lrms_state":"COMPLETED"}}`)
	e, err := r.Decode(body)
	if err != nil {
		t.Fatal(err)
	}
	var d events.ExitedData
	if err := e.Payload(&d); err != nil || d.ExitCode != 3 || d.NativeState != "COMPLETED" {
		t.Fatalf("upcast payload %s (%v), want exit_code 3 and native_state COMPLETED", e.Data, err)
	}
	if e.Hash != events.HashOf(body) {
		t.Error("the hash is not the stored body's: the chain would break")
	}
	// Without the upcaster, the same body is refused with a clear error, not misread.
	if _, err := events.Decode(body); !errors.Is(err, events.ErrNoUpcaster) {
		t.Errorf("Decode of a v0 event with no upcaster: %v, want ErrNoUpcaster", err)
	}
	// It folds into a started job like a current exited event.
	st := startedState(t, id)
	e.Seq = st.LastSeq + 1
	st, err = events.Apply(st, e)
	if err != nil || st.ExitCode == nil || *st.ExitCode != 3 || st.NativeState != "COMPLETED" {
		t.Fatalf("folding the upcast event: %v, exit %v, native %q", err, st.ExitCode, st.NativeState)
	}
}

// A version newer than this build knows is refused, never read as the current one.
func TestUpcastRefusesNewerVersions(t *testing.T) {
	body := []byte(`{"specversion":"1.0","id":"01M7Z0000000000000000000EX","source":"x","type":"dev.gridwire.job.exited.v2",` +
		`"subject":"01M7Z0000000000000000000JB","time":"2025-01-02T03:04:05Z","data":{"exit_code":3}}`)
	if _, err := events.Decode(body); !errors.Is(err, events.ErrNewerVersion) {
		t.Errorf("Decode of a v2 event: %v, want ErrNewerVersion", err)
	}
}

func TestNewUpcastersRefusesBadRegistrations(t *testing.T) {
	noop := func(e events.Event) (json.RawMessage, error) { return e.Data, nil }
	for _, c := range []struct {
		what string
		ups  []events.Upcaster
	}{
		{"a duplicate", []events.Upcaster{exitedV0, exitedV0}},
		{"an unknown event", []events.Upcaster{{Name: "exploded", From: 0, Up: noop}}},
		{"from the current version", []events.Upcaster{{Name: events.Exited, From: 1, Up: noop}}},
		{"no function", []events.Upcaster{{Name: events.Exited, From: 0}}},
	} {
		if _, err := events.NewUpcasters(c.ups...); err == nil {
			t.Errorf("%s was accepted", c.what)
		}
	}
	bad, _ := events.NewUpcasters(events.Upcaster{Name: events.Exited, From: 0,
		Up: func(events.Event) (json.RawMessage, error) { return json.RawMessage("{"), nil }})
	e, _ := events.New(events.NewID(), events.Exited, "", time.Now(), map[string]int{"code": 1})
	if _, err := bad.Upcast(e, 0); !errors.Is(err, events.ErrBadEvent) {
		t.Errorf("an upcaster returning broken JSON: %v, want ErrBadEvent", err)
	}
}

// startedState is a job folded up to RUNNING.
func startedState(t *testing.T, id string) events.State {
	t.Helper()
	var st events.State
	for i, step := range []struct {
		name  events.Name
		route string
		data  any
	}{
		{events.Submitted, "", events.Job{ID: id, Executable: "/bin/true"}},
		{events.Incarnated, "", events.IncarnatedData{Cluster: "local"}},
		{events.Queued, "local", events.QueuedData{Cluster: "local"}},
		{events.Started, "local", events.StartedData{Cluster: "local", NativeID: "42", Running: true}},
	} {
		e, err := events.New(id, step.name, step.route, time.Now(), step.data)
		if err != nil {
			t.Fatal(err)
		}
		e.Seq = uint64(i + 1)
		if st, err = events.Apply(st, e); err != nil {
			t.Fatal(err)
		}
	}
	return st
}
