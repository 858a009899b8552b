package events

import (
	"bytes"
	"encoding/json"
	"testing"
)

func TestSubjectTokens(t *testing.T) {
	s := Subject("J1", Queued, "hpc1")
	if id, ok := JobOfSubject(s); !ok || id != "J1" {
		t.Errorf("JobOfSubject(%q) = %q, %v", s, id, ok)
	}
	if r := RouteOfSubject(s); r != "hpc1" {
		t.Errorf("RouteOfSubject(%q) = %q", s, r)
	}
	if r := RouteOfSubject(Subject("J1", Held, "")); r != NoRoute {
		t.Errorf("route of an unrouted event = %q", r)
	}
	for _, bad := range []string{"gridwire.api.events", "jobs.", "jobs", "$KV.b.k"} {
		if id, ok := JobOfSubject(bad); ok {
			t.Errorf("JobOfSubject(%q) = %q, true", bad, id)
		}
		if r := RouteOfSubject(bad); r != NoRoute {
			t.Errorf("RouteOfSubject(%q) = %q", bad, r)
		}
	}
	if got := KVSubject("gridwire-jobs", "job.J1"); got != "$KV.gridwire-jobs.job.J1" {
		t.Errorf("KVSubject = %q", got)
	}
}

// Every event's payload decodes strictly into the type NewPayload names for it.
func TestNewPayloadTakesWhatStoreWrites(t *testing.T) {
	for _, body := range storeBodies(t) {
		e, err := Decode(body)
		if err != nil {
			t.Fatal(err)
		}
		dec := json.NewDecoder(bytes.NewReader(e.Data))
		dec.DisallowUnknownFields()
		if err := dec.Decode(NewPayload(e.Name)); err != nil {
			t.Errorf("%s: %v", e.Name, err)
		}
	}
	if _, ok := NewPayload(Submitted).(*Job); !ok {
		t.Error("submitted does not carry a Job")
	}
	if _, ok := NewPayload(CancelRequested).(*Note); !ok {
		t.Error("cancel_requested does not carry a Note")
	}
}
