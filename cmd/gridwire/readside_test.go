package main

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/pkg/proctest"
	"github.com/gridwire/gridwire/services/readside"
)

// serveCLI runs `gridwire serve` with the given extra args until the test ends.
func serveCLI(t *testing.T, args ...string) string {
	t.Helper()
	addr := freeAddr(t)
	dir := t.TempDir() // removed after serve has stopped (cleanups run last first)
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() {
		_, _, err := runCLI(ctx, append([]string{"serve", "--data", dir, "--http", addr, "--log-level", "error"}, args...)...)
		served <- err
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-served:
			if err != nil && !errors.Is(err, context.Canceled) {
				t.Errorf("serve ended with %v", err)
			}
		case <-time.After(20 * time.Second):
			t.Error("serve did not stop")
		}
		proctest.KillSessionsNaming(dir) // a job still running is ended with the test
	})
	deadline := time.Now().Add(20 * time.Second)
	for {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return "http://" + addr
		}
		select {
		case err := <-served:
			t.Fatalf("serve ended: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("serve did not listen")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestServeRefusesOtherAddressesWithoutTokens(t *testing.T) {
	_, _, err := runCLI(context.Background(), "serve", "--data", t.TempDir(), "--http", "0.0.0.0:0")
	if err == nil || !strings.Contains(err.Error(), "no API tokens") {
		t.Fatalf("serve on 0.0.0.0 without tokens: %v, want a refusal", err)
	}
	cfg := filepath.Join(t.TempDir(), "gridwire.yaml")
	_ = os.WriteFile(cfg, []byte("tokens:\n  - {token: short, principal: a, allow: [read]}\n"), 0o600)
	if _, _, err := runCLI(context.Background(), "serve", "--config", cfg, "--http", "127.0.0.1:0"); err == nil ||
		!strings.Contains(err.Error(), "tokens[0].token") {
		t.Fatalf("serve with a short token: %v, want tokens[0].token named", err)
	}
}

func request(t *testing.T, method, url, token string, body io.Reader) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url, body)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// With tokens, every route needs one with the right permission, and the principal is
// recorded on the events a request causes.
func TestServeWithTokens(t *testing.T) {
	const alice, reader = "alice-secret-token-1", "reader-secret-token-2"
	cfg := filepath.Join(t.TempDir(), "gridwire.yaml")
	_ = os.WriteFile(cfg, []byte(`tokens:
  - {token: `+alice+`, principal: alice, allow: [submit, read, cancel]}
  - {token: `+reader+`, principal: auditor, allow: [read]}
`), 0o600)
	server := serveCLI(t, "--config", cfg)
	hello := filepath.Join("..", "..", "examples", "hello.json")
	doc, _ := os.ReadFile(hello)
	checks := []struct {
		method, path, token string
		want                int
	}{
		{"GET", "/healthz", "", 200},
		{"GET", "/", "", 200},
		{"GET", "/ui/app.js", "", 200},
		{"GET", "/v1/jobs", "", 401},
		{"GET", "/v1/jobs", "wrong-token-wrong-token", 401},
		{"GET", "/v1/jobs", reader, 200},
		{"GET", "/metrics", reader, 200},
		{"POST", "/v1/jobs", reader, 403},
		{"POST", "/v1/events", alice, 403},
	}
	for _, c := range checks {
		if code, body := request(t, c.method, server+c.path, c.token, strings.NewReader(string(doc))); code != c.want {
			t.Errorf("%s %s with %q: %d %s, want %d", c.method, c.path, c.token, code, body, c.want)
		}
	}
	out, errOut, err := runCLI(context.Background(), "submit", "--wait", "--server", server, "--token", alice, hello)
	if err != nil {
		t.Fatalf("submit: %v %s", err, errOut)
	}
	id := strings.Fields(out)[0]
	evs, err := (&clientFlags{server: server, token: reader, retries: 1}).mustClient(t).history(context.Background(), id)
	if err != nil || len(evs) == 0 || evs[0].Name != events.Submitted || evs[0].Principal != "alice" {
		t.Fatalf("history %v (%v): the submission is not recorded as alice's", evs, err)
	}
	// The append latency is observed when the projector folds the event, which may come
	// after submit --wait has seen the job end on the event stream: wait for it.
	const want = `gridwire_event_append_seconds_count{event="submitted",service="ingest"}`
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		code, body := request(t, "GET", server+"/metrics", reader, nil)
		if code == 200 && strings.Contains(body, want) {
			break
		}
		if code != 200 || time.Now().After(deadline) {
			t.Fatalf("metrics: %d, no %s after 30 s\n%s", code, want, body)
		}
	}
}

// replay rebuilds the projection equal to the live one; audit verify finds the chains
// intact, then finds a forged event.
func TestReplayAndAuditVerbs(t *testing.T) {
	h := newHarness(t)
	var ids []string
	for i := 0; i < 3; i++ {
		ids = append(ids, h.submitJSON(map[string]any{"version": 3, "executable": "/bin/sh", "arguments": []string{"-c", "exit " + string(rune('0'+i))}}))
	}
	for _, id := range ids {
		h.waitEnd(id)
	}
	url := "--nats-url=" + h.natsURL()
	waitProjection(t, h)
	out, errOut, err := runCLI(context.Background(), "replay", url)
	if err != nil || !strings.Contains(out, "identical to the live projection gridwire-jobs") || !strings.Contains(out, " of 3 jobs ") {
		t.Fatalf("replay: %v\n%s\n%s", err, out, errOut)
	}
	keys := "--signing-keys=" + h.keysDir()
	out, _, err = runCLI(context.Background(), "audit", "verify", "--all", url, keys)
	if err != nil || !strings.Contains(out, "verified 3 jobs") || !strings.Contains(out, ": 0 broken") || strings.Contains(out, "unsigned") {
		t.Fatalf("audit verify --all: %v\n%s", err, out)
	}
	forged, _ := events.New(ids[1], events.HoldRequested, "", time.Now(), events.Note{})
	forged.Source, forged.PrevHash = "mallory/forge", strings.Repeat("f", 64)
	body, _ := forged.Encode()
	if _, err := h.client.JS.Publish(context.Background(), events.Subject(ids[1], events.HoldRequested, ""), body); err != nil {
		t.Fatal(err)
	}
	out, _, err = runCLI(context.Background(), "audit", "verify", ids[1], url, keys)
	var ec exitCode
	if !errors.As(err, &ec) || ec != 1 || !strings.Contains(out, "BROKEN job "+ids[1]) || !strings.Contains(out, "prevseq") {
		t.Fatalf("audit verify of the forged job: %v\n%s", err, out)
	}
	if _, _, err := runCLI(context.Background(), "audit", "verify", url); err == nil {
		t.Fatal("audit verify with neither an ID nor --all ran")
	}
}

// waitProjection waits until the live projection's stamp is the log's last sequence.
func waitProjection(t *testing.T, h *harness) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		stream, err := h.client.JS.Stream(context.Background(), events.Stream)
		if err == nil {
			last := stream.CachedInfo().State.LastSeq
			kv, err := h.client.JS.KeyValue(context.Background(), readside.JobsBucket)
			if err == nil {
				if e, err := kv.Get(context.Background(), readside.MetaKey); err == nil && strings.Contains(string(e.Value()), `"seq":`+strconv.FormatUint(last, 10)+`,`) {
					return
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("the live projection did not reach the end of the log")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// The NATS server restarts while jobs run: the live projection catches up by itself and
// a replay from scratch still equals it.
func TestProjectionSurvivesServerRestart(t *testing.T) {
	h := newHarness(t)
	before := h.submitJSON(gated())
	h.waitFor(before, "RUNNING", isRunning)
	h.restartServer()
	h.release(before, "0")
	after := h.submitJSON(map[string]any{"version": 3, "executable": "/bin/true"})
	h.waitEnd(before)
	h.waitEnd(after)
	waitProjection(t, h)
	out, errOut, err := runCLI(context.Background(), "replay", "--nats-url="+h.natsURL())
	if err != nil || !strings.Contains(out, "identical to the live projection gridwire-jobs\n") {
		t.Fatalf("replay after a server restart: %v\n%s\n%s", err, out, errOut)
	}
}

// `gridwire readside --http` alone serves the read API of a log other processes write:
// the job table, a job, the metrics; and no way in, which is ingest's.
func TestReadsideAloneServesTheReadAPI(t *testing.T) {
	h := newHarness(t)
	addr := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() {
		_, _, err := runCLI(ctx, "readside", "--nats-url", h.natsURL(), "--http", addr, "--log-level", "error",
			"--data", t.TempDir())
		served <- err
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("readside ended with %v", err)
		}
	})
	id := h.submitJSON(map[string]any{"version": 3, "executable": "/bin/true"})
	h.waitEnd(id)
	server := "http://" + addr
	deadline := time.Now().Add(30 * time.Second)
	for {
		if code, body := request(t, "GET", server+"/v1/jobs?state=SUCCEEDED", "", nil); code == 200 && strings.Contains(body, id) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the read side alone never listed job %s", id)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if code, body := request(t, "GET", server+"/v1/jobs/"+id, "", nil); code != 200 || !strings.Contains(body, `"SUCCEEDED"`) {
		t.Errorf("GET /v1/jobs/%s: %d %s", id, code, body)
	}
	if code, body := request(t, "GET", server+"/metrics", "", nil); code != 200 || !strings.Contains(body, `gridwire_jobs{cluster="local",state="SUCCEEDED"}`) {
		t.Errorf("metrics: %d\n%s", code, body)
	}
	if code, _ := request(t, "POST", server+"/v1/jobs", "", strings.NewReader(`{"version":3,"executable":"/bin/true"}`)); code < 400 {
		t.Errorf("POST /v1/jobs to the read side alone: %d, want a refusal", code)
	}
}
