package ingest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/events/eventstest"
	"github.com/gridwire/gridwire/pkg/bus"
	"github.com/gridwire/gridwire/pkg/cluster"
	"github.com/gridwire/gridwire/pkg/httpapi"
	"github.com/nats-io/nats.go"
)

const (
	aliceToken = "alice-token-0123456789"
	bobToken   = "bob-token-0123456789ab"
	siteA      = "urn:site:a/slurm"
	siteB      = "urn:site:b/pbs"
)

var t0 = time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)

// externalServer runs ingest over a fresh embedded server, taking external events with
// auth checking NATS requests, and serves its routes over HTTP behind auth's middleware.
func externalServer(t *testing.T, auth *httpapi.Auth) (*bus.Bus, *events.Store, string) {
	t.Helper()
	b, st := eventstest.Open(t, "test/ingest")
	deps := Deps{Conn: b.Conn, Store: st, Events: st, Auth: auth}
	svc, err := New(Config{}, deps)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	svc.Routes(mux)
	srv := httptest.NewServer(auth.Middleware(mux))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, Config{}, deps) }()
	t.Cleanup(func() {
		srv.Close()
		cancel()
		if err := <-done; err != nil {
			t.Errorf("stopping: %v", err)
		}
	})
	return b, st, srv.URL
}

// eventually polls cond until it holds or 20s pass.
func eventually(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("waited 20s for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func testAuth(t *testing.T) *httpapi.Auth {
	t.Helper()
	a, err := httpapi.NewAuth([]cluster.Token{
		{Token: aliceToken, Principal: "alice", Allow: []string{"read", "publish"}, Sources: []string{siteA}},
		{Token: bobToken, Principal: "bob", Allow: []string{"read", "publish"}, Sources: []string{siteB}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// cloudEvent is a structured-mode CloudEvent as another system would write it.
func cloudEvent(id, job, source string, name events.Name, at time.Time, data any) []byte {
	b, _ := json.Marshal(map[string]any{"specversion": "1.0", "id": id, "source": source,
		"type": name.Type(), "subject": job, "time": at.Format(time.RFC3339Nano),
		"datacontenttype": "application/json", "data": data})
	return b
}

func post(t *testing.T, url, token string, body []byte) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/cloudevents+json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out map[string]any
	_ = json.Unmarshal(raw, &out)
	return resp.StatusCode, out
}

func errCode(out map[string]any) string {
	e, _ := out["error"].(map[string]any)
	c, _ := e["code"].(string)
	return c
}

// Another system's events are accepted for its own source, refused for another's, and
// land in the job's history chained like gridwire's own, so one history holds a job
// gridwire did not start.
func TestExternalEventsOverHTTP(t *testing.T) {
	_, st, srv := externalServer(t, testAuth(t))
	url := srv + "/v1/events"
	job := events.NewID()
	sub := cloudEvent(events.NewID(), job, siteA, events.Submitted, t0,
		events.Job{ID: job, Name: "site job", Executable: "/opt/app", Submitter: "site-a"})

	if code, out := post(t, url, bobToken, sub); code != 403 || errCode(out) != "source_not_allowed" {
		t.Fatalf("bob publishing for site a: %d %v, want 403 source_not_allowed", code, out)
	}
	if code, out := post(t, url, "", sub); code != 401 {
		t.Fatalf("no token: %d %v, want 401", code, out)
	}
	if h, _ := st.Load(context.Background(), job); len(h.Events) != 0 {
		t.Fatalf("a refused event was stored: %v", h.Events)
	}
	code, out := post(t, url, aliceToken, sub)
	if code != 201 || out["status"] != "SUBMITTED" {
		t.Fatalf("alice publishing for site a: %d %v, want 201", code, out)
	}
	// A retry of the same event (same id) is answered alike and stores nothing new.
	if code, again := post(t, url, aliceToken, sub); code != 201 || again["seq"] != out["seq"] {
		t.Fatalf("retry: %d %v, want 201 at seq %v", code, again, out["seq"])
	}
	inc := cloudEvent(events.NewID(), job, siteA, events.Incarnated, t0.Add(time.Second),
		events.IncarnatedData{Cluster: "site-a", Profile: "slurm", WorkDir: "/scratch/x"})
	if code, out := post(t, url, aliceToken, inc); code != 201 || out["status"] != "INCARNATED" {
		t.Fatalf("incarnated: %d %v", code, out)
	}
	h, err := st.Load(context.Background(), job)
	if err != nil || len(h.Events) != 2 {
		t.Fatalf("history %v (%v), want 2 events", h.Events, err)
	}
	first, second := h.Events[0], h.Events[1]
	if first.Principal != "alice" || first.Source != siteA || second.PrevHash != first.Hash || second.PrevSeq != first.Seq {
		t.Fatalf("external events not recorded as gridwire's own: %+v / %+v", first, second)
	}

	refusals := []struct {
		name string
		body []byte
		code int
		err  string
	}{
		{"unknown type", bytes.Replace(inc, []byte("job.incarnated.v1"), []byte("job.teleported.v1"), 1), 400, "unknown_type"},
		{"not a CloudEvent", []byte(`{"id":1}`), 400, "invalid_event"},
		{"payload field unknown", cloudEvent(events.NewID(), job, siteA, events.Queued, t0, map[string]any{"cluser": "x"}), 400, "invalid_data"},
		{"submitted job field unknown", cloudEvent(events.NewID(), events.NewID(), siteA, events.Submitted, t0, map[string]any{"id": job, "colour": "blue"}), 400, "invalid_data"},
		{"payload of the wrong shape", cloudEvent(events.NewID(), job, siteA, events.Exited, t0, map[string]any{"exit_code": "zero"}), 400, "invalid_data"},
		{"fold refuses", cloudEvent(events.NewID(), job, siteA, events.Exited, t0, events.ExitedData{ExitCode: 0}), 409, "illegal_transition"},
		{"a second submission", cloudEvent(events.NewID(), job, siteA, events.Submitted, t0, events.Job{ID: job}), 409, "illegal_transition"},
		{"what only an executor records", cloudEvent(events.NewID(), job, siteA, events.DirectoryDeleted, t0, events.DirectoryDeletedData{OK: true}), 403, "not_external"},
	}
	for _, r := range refusals {
		if code, out := post(t, url, aliceToken, r.body); code != r.code || errCode(out) != r.err {
			t.Errorf("%s: %d %v, want %d %s", r.name, code, out, r.code, r.err)
		}
	}
	if h, _ := st.Load(context.Background(), job); len(h.Events) != 2 {
		t.Fatalf("refused events were stored: %d events", len(h.Events))
	}
}

// The NATS subject takes the same events with the token in a header.
func TestExternalEventsOverNATS(t *testing.T) {
	b, st, _ := externalServer(t, testAuth(t))
	eventually(t, "ingest to subscribe", func() bool {
		_, err := b.Conn.Request(events.SubjectExternal, []byte("{}"), time.Second)
		return err == nil
	})
	request := func(token string, body []byte) (string, map[string]any) {
		m := nats.NewMsg(events.SubjectExternal)
		m.Data = body
		m.Header.Set("Authorization", "Bearer "+token)
		reply, err := b.Conn.RequestMsg(m, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		var out map[string]any
		_ = json.Unmarshal(reply.Data, &out)
		return reply.Header.Get(StatusHeader), out
	}
	job := events.NewID()
	sub := cloudEvent(events.NewID(), job, siteB, events.Submitted, t0, events.Job{ID: job, Executable: "x"})
	if status, out := request(aliceToken, sub); status != "403" || errCode(out) != "source_not_allowed" {
		t.Fatalf("alice for site b: %s %v", status, out)
	}
	if status, out := request("nope-nope-nope-nope", sub); status != "401" {
		t.Fatalf("unknown token: %s %v", status, out)
	}
	if status, out := request(bobToken, sub); status != "" || out["status"] != "SUBMITTED" {
		t.Fatalf("bob for site b: %s %v", status, out)
	}
	if stt, err := st.State(context.Background(), job); err != nil || stt.Status != events.StatusSubmitted {
		t.Fatalf("state %v %v", stt.Status, err)
	}
}
