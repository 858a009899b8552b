package main

import (
	"context"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/pkg/cluster"
	"github.com/gridwire/gridwire/pkg/proctest"
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

// A fork cluster ends every process of a job, as a batch system does: what the program
// left running when it ended gets TERM, and a cancel ends even a job that ignores TERM
// (KILL after the cluster's KILL_WAIT, 1 s here). h's one cluster is the fork cluster
// to try: local, or over SSH to this host, whose processes the test can see.
func checkJobsLeaveNothingRunning(t *testing.T, h *harness) {
	id := h.submitJSON(map[string]any{"version": 3, "executable": "/bin/sh",
		"arguments": []string{"-c", "trap '' TERM; sleep 60 & sleep 60; wait"}})
	st := h.waitFor(id, "RUNNING", isRunning)
	pgid, err := strconv.Atoi(st.NativeID)
	if err != nil {
		t.Fatalf("native ID %q", st.NativeID)
	}
	h.request(id, events.CancelRequested)
	if st := h.waitEnd(id); st.Status != events.StatusCancelled {
		t.Fatalf("state %s (%s), want CANCELLED", st.Status, st.Reason)
	}
	if !proctest.GroupEnds(pgid, 30*time.Second) {
		t.Errorf("cancelled job %s: a process that ignores TERM still runs in its group %d", id, pgid)
	}

	id = h.submitJSON(map[string]any{"version": 3, "executable": "/bin/sh",
		"arguments": []string{"-c", "sleep 60 & echo $! >bg.pid"}})
	if st := h.waitEnd(id); st.Status != events.StatusSucceeded {
		t.Fatalf("state %s (%s), want SUCCEEDED", st.Status, st.Reason)
	}
	pgid, _ = strconv.Atoi(h.started(id).NativeID)
	if !proctest.GroupEnds(pgid, 30*time.Second) {
		t.Errorf("job %s ended, but the sleep it started still runs in its group %d", id, pgid)
	}
}

func TestForkJobsLeaveNothingRunning(t *testing.T) {
	cfg := cluster.Default()
	cfg.Clusters[0].Fields = map[string]string{"KILL_WAIT": "1"}
	checkJobsLeaveNothingRunning(t, newHarnessWith(t, cfg))
}
