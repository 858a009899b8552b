package main

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gridwire/gridwire/events"
)

// gridwire hold, resume and cancel go through the HTTP API to the executor, which
// records each request, then stops, continues and aborts the running job, each
// recorded in its history.
func TestControlVerbs(t *testing.T) {
	h := newHarness(t)
	h.mu.Lock()
	srv := httptest.NewServer(h.services["executor"].sys.routes())
	h.mu.Unlock()
	t.Cleanup(srv.Close)
	id := h.submitJSON(gated())
	h.waitFor(id, "RUNNING", isRunning)
	for _, step := range []struct {
		verb string
		want events.Status
	}{{"hold", events.StatusHeld}, {"resume", events.StatusRunning}, {"cancel", events.StatusCancelled}} {
		out, errOut, err := runCLI(context.Background(), step.verb, "--server", srv.URL, "--reason", "test", id)
		if err != nil || !strings.Contains(out, step.verb+" requested for job "+id) {
			t.Fatalf("gridwire %s: %v %q %q", step.verb, err, out, errOut)
		}
		h.waitFor(id, string(step.want), func(st events.State) bool { return st.Status == step.want })
	}
	if _, errOut, err := runCLI(context.Background(), "cancel", "--server", srv.URL, id); err == nil || !strings.Contains(err.Error()+errOut, "job_ended") {
		t.Errorf("cancel of a cancelled job: %v %q; want job_ended", err, errOut)
	}
	// The requests are recorded by the room that carries them out, under its own source.
	for _, e := range h.history(id) {
		if (e.Name == events.HoldRequested || e.Name == events.ResumeRequested || e.Name == events.CancelRequested) &&
			!strings.HasPrefix(e.Source, "gridwire/executor/") {
			t.Errorf("%s recorded under source %q, want the executor's", e.Name, e.Source)
		}
	}
	h.assertCleanHistory(id)
}
