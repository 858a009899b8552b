package ingest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/events/eventstest"
)

// A submission repeated with its key, after a lost answer or a crash halfway, returns the
// same job IDs and appends nothing twice; the same key with another description is refused.
func TestIdempotentSubmissions(t *testing.T) {
	b, st := eventstest.Open(t, "test/ingest")
	keys := KVKeys{JS: b.JS}
	svc, err := New(Config{}, Deps{Store: st, Keys: keys})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	doc := []byte(`{"version": 3, "executable": "/bin/true"}`)
	sub := Submission{File: "a.json", Data: doc, Submitter: "alice", IdempotencyKey: "a.json:01"}
	first, err := svc.Submit(ctx, sub)
	if err != nil {
		t.Fatal(err)
	}
	again, err := svc.Submit(ctx, sub)
	if err != nil || len(again.Jobs) != 1 || again.Jobs[0] != first.Jobs[0] {
		t.Fatalf("a repeat returned %v (%v), want %v", again.Jobs, err, first.Jobs)
	}
	if names := eventstest.Names(t, st, first.Jobs[0]); len(names) != 1 {
		t.Fatalf("job %s after a repeat: %v, want one submitted event", first.Jobs[0], names)
	}
	h, err := st.Load(ctx, first.Jobs[0])
	if err != nil {
		t.Fatal(err)
	}
	var j events.Job
	if err := h.Events[0].Payload(&j); err != nil || j.IdempotencyKey != "a.json:01" {
		t.Fatalf("the submitted event carries key %q (%v), want the submission's", j.IdempotencyKey, err)
	}

	// Another submitter's same key is another submission.
	bob := sub
	bob.Submitter = "bob"
	other, err := svc.Submit(ctx, bob)
	if err != nil || other.Jobs[0] == first.Jobs[0] {
		t.Fatalf("bob's submission with alice's key: %v (%v)", other.Jobs, err)
	}

	changed := sub
	changed.Data = []byte(`{"version": 3, "executable": "/bin/false"}`)
	if _, err := svc.Submit(ctx, changed); !errors.Is(err, ErrKeyReused) {
		t.Fatalf("a key reused for another description: %v, want ErrKeyReused", err)
	}

	// A gateway that died after recording the key and before appending: the retry
	// appends the recorded job, under the recorded ID.
	crashed := Submission{File: "c.json", Data: doc, Submitter: "alice", IdempotencyKey: "c.json:01"}
	jobs, err := svc.Parse(crashed)
	if err != nil {
		t.Fatal(err)
	}
	Link(jobs, "alice")
	if err := svc.reserve(ctx, crashed, jobs); err != nil {
		t.Fatal(err)
	}
	retry, err := svc.Submit(ctx, crashed)
	if err != nil || retry.Jobs[0] != jobs[0].ID {
		t.Fatalf("retry after a crash: %v (%v), want the recorded %s", retry.Jobs, err, jobs[0].ID)
	}
	if names := eventstest.Names(t, st, jobs[0].ID); len(names) != 1 {
		t.Fatalf("recorded job after the retry: %v", names)
	}
}

// POST /v1/jobs takes the key in the Idempotency-Key header.
func TestIdempotencyKeyHeader(t *testing.T) {
	b, st := eventstest.Open(t, "test/ingest")
	svc, err := New(Config{}, Deps{Store: st, Keys: KVKeys{JS: b.JS}})
	if err != nil {
		t.Fatal(err)
	}
	post := func(key string) (int, Accepted) {
		req := httptest.NewRequest(http.MethodPost, "/v1/jobs", bytes.NewReader([]byte(`{"version": 3, "executable": "/bin/true"}`)))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(HeaderIdempotencyKey, key)
		w := httptest.NewRecorder()
		svc.ServeHTTP(w, req)
		var acc Accepted
		_ = json.Unmarshal(w.Body.Bytes(), &acc)
		return w.Code, acc
	}
	c1, a1 := post("k-1")
	c2, a2 := post("k-1")
	if c1 != http.StatusCreated || c2 != http.StatusCreated || len(a1.Jobs) != 1 || a1.Jobs[0] != a2.Jobs[0] {
		t.Fatalf("two POSTs with one key: %d %v, %d %v", c1, a1.Jobs, c2, a2.Jobs)
	}
	if c, _ := post("bad\nkey"); c != http.StatusUnprocessableEntity {
		t.Fatalf("a key with a newline: %d, want 422", c)
	}
}
