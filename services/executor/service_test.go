package executor

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/pkg/target"
)

func newForkJob(t *testing.T, program string) events.IncarnatedData {
	wd := filepath.Join(t.TempDir(), events.NewID())
	return forkIncarnation("local", wd, program)
}

// Hold, resume and cancel of a running fork job: the requests go through the log, the
// executor runs the profile's scripts on the job's process group, and records each.
func TestForkHoldResumeCancel(t *testing.T) {
	e := newEnv(t)
	e.run(Config{Cluster: localCluster(), ID: "x1"}, nil)
	api := ControlAPI{Store: e.store}
	id := e.queue(newForkJob(t, "sleep 30"))
	st := e.waitFor(id, "RUNNING", func(s events.State) bool { return s.Status == events.StatusRunning })
	pid := st.NativeID

	steps := []struct {
		req    events.Name
		status events.Status
		proc   string
	}{
		{events.HoldRequested, events.StatusHeld, "T"},
		{events.ResumeRequested, events.StatusRunning, "S"},
		{events.CancelRequested, events.StatusCancelled, ""},
	}
	for _, s := range steps {
		if _, err := api.Request(context.Background(), id, s.req, events.Note{Reason: "test"}); err != nil {
			t.Fatalf("%s: %v", s.req, err)
		}
		e.waitFor(id, string(s.status), func(st events.State) bool { return st.Status == s.status })
		waitProc(t, pid, s.proc)
	}
	names := e.names(id)
	for _, n := range []events.Name{events.Started, events.Held, events.Resumed, events.Cancelled} {
		if count(names, n) != 1 {
			t.Errorf("%d %s events in %v", count(names, n), n, names)
		}
	}
	if _, err := os.Stat(filepath.Join(e.mustState(id).Incarnation.WorkDir, events.ExitFile)); err == nil {
		t.Error("a cancelled job ran to its end")
	}
}

func (e *env) mustState(id string) events.State {
	e.t.Helper()
	st, err := e.store.State(context.Background(), id)
	if err != nil {
		e.t.Fatal(err)
	}
	return st
}

// A hold the target refuses (here: the process is gone) is recorded as action_failed
// with the script's output, and the job stays as it was.
func TestFailedHoldIsRecorded(t *testing.T) {
	e := newEnv(t)
	e.run(Config{Cluster: localCluster(), ID: "x1"}, nil)
	inc := newForkJob(t, "sleep 30")
	inc.Scripts[events.ScriptHold] = events.Script{Body: "echo 'no such process' >&2; exit 1"}
	id := e.queue(inc)
	e.waitFor(id, "RUNNING", func(s events.State) bool { return s.Status == events.StatusRunning })
	t.Cleanup(func() {
		ControlAPI{Store: e.store}.Request(context.Background(), id, events.CancelRequested, events.Note{})
	})
	if _, err := (ControlAPI{Store: e.store}).Request(context.Background(), id, events.HoldRequested, events.Note{}); err != nil {
		t.Fatal(err)
	}
	st := e.waitFor(id, "the hold's result", func(s events.State) bool { return !s.HoldRequested })
	if st.Status != events.StatusRunning {
		t.Errorf("status %s after a failed hold", st.Status)
	}
	h, _ := e.store.Load(context.Background(), id)
	last := h.Events[len(h.Events)-1]
	var n events.Note
	if last.Name != events.ActionFailed || last.Payload(&n) != nil || n.Action != events.ScriptHold || !strings.Contains(n.Reason, "no such process") {
		t.Errorf("last event %s %+v; want action_failed naming HOLD and its output", last.Name, n)
	}
}

// A job cancelled before any executor took it never starts.
func TestCancelBeforeStartStopsTheStart(t *testing.T) {
	e := newEnv(t)
	inc := newForkJob(t, "echo ran > ran")
	id := e.queue(inc)
	if _, err := (ControlAPI{Store: e.store}).Request(context.Background(), id, events.CancelRequested, events.Note{}); err != nil {
		t.Fatal(err)
	}
	e.run(Config{Cluster: localCluster(), ID: "x1"}, nil)
	st := e.waitFor(id, "CANCELLED", func(s events.State) bool { return s.Status.Terminal() })
	if st.Status != events.StatusCancelled || st.NativeID != "" {
		t.Errorf("status %s, native ID %q; want cancelled before it started", st.Status, st.NativeID)
	}
	if _, err := os.Stat(filepath.Join(inc.WorkDir, "ran")); err == nil {
		t.Error("the cancelled job ran")
	}
}

// An executor that died after START but before the started event: the next one finds
// the run beside the job, records it as adopted, and the job runs once.
func TestAdoptionAfterCrashBetweenStartAndStarted(t *testing.T) {
	e := newEnv(t)
	runs := filepath.Join(t.TempDir(), "runs")
	inc := newForkJob(t, "echo run >> "+runs)
	id := e.queue(inc)
	// The crashed executor's START: the process runs, no event was recorded.
	crashed := &ForkTarget{Cluster: "local"}
	first, err := crashed.Start(context.Background(), e.mustState(id))
	if err != nil {
		t.Fatal(err)
	}
	e.run(Config{Cluster: localCluster(), ID: "x2"}, nil)
	st := e.waitFor(id, "started", func(s events.State) bool { return s.NativeID != "" })
	if st.NativeID != first.NativeID {
		t.Errorf("recorded native ID %s, want the crashed executor's run %s", st.NativeID, first.NativeID)
	}
	h, _ := e.store.Load(context.Background(), id)
	for _, ev := range h.Events {
		var d events.StartedData
		if ev.Name == events.Started && (ev.Payload(&d) != nil || !d.Adopted || d.Executor != "x2") {
			t.Errorf("started %+v; want adopted by x2", d)
		}
	}
	waitFile(t, filepath.Join(inc.WorkDir, events.ExitFile))
	if got := waitFile(t, runs); got != "run\n" {
		t.Errorf("the job ran %d times", strings.Count(got, "run"))
	}
}

// failingTarget never starts anything.
type failingTarget struct{ calls atomic.Int32 }

func (f *failingTarget) Start(context.Context, events.State) (events.StartedData, error) {
	f.calls.Add(1)
	return events.StartedData{}, errors.New("the target is down")
}

func (f *failingTarget) Control(context.Context, events.State, string) (target.Output, error) {
	return target.Output{}, errors.New("the target is down")
}

// Deliveries are bounded: a job that cannot be started fails with the reason.
func TestExhaustedStartsFailTheJob(t *testing.T) {
	e := newEnv(t)
	tg := &failingTarget{}
	e.run(Config{Cluster: localCluster(), ID: "x1", MaxDeliver: 3}, tg)
	id := e.queue(newForkJob(t, "true"))
	st := e.waitFor(id, "FAILED", func(s events.State) bool { return s.Status.Terminal() })
	if st.Status != events.StatusFailed || !strings.Contains(st.Reason, "the target is down") || !strings.Contains(st.Reason, "3 attempts") {
		t.Errorf("status %s reason %q; want FAILED after 3 attempts naming the cause", st.Status, st.Reason)
	}
	if n := tg.calls.Load(); n != 3 {
		t.Errorf("%d start attempts, want 3", n)
	}
}

// slowTarget takes longer than the ack deadline to start.
type slowTarget struct {
	ForkTarget
	delay time.Duration
	calls atomic.Int32
}

func (s *slowTarget) Start(ctx context.Context, st events.State) (events.StartedData, error) {
	s.calls.Add(1)
	time.Sleep(s.delay)
	return s.ForkTarget.Start(ctx, st)
}

// A START slower than the ack deadline keeps its delivery: it is not handed to another
// worker meanwhile.
func TestSlowStartKeepsItsDelivery(t *testing.T) {
	e := newEnv(t)
	tg := &slowTarget{ForkTarget: ForkTarget{Cluster: "local"}, delay: 4 * time.Second}
	e.run(Config{Cluster: localCluster(), ID: "x1", AckWait: 1500 * time.Millisecond, Workers: 2}, tg)
	id := e.queue(newForkJob(t, "true"))
	e.waitFor(id, "started", func(s events.State) bool { return s.NativeID != "" })
	if n := tg.calls.Load(); n != 1 {
		t.Errorf("START called %d times; the delivery was redelivered while it ran", n)
	}
}

// The HTTP API: 202 with the request, 404 for an unknown job, 409 for an ended one or
// a resume of a job not held.
func TestControlAPI(t *testing.T) {
	e := newEnv(t)
	mux := http.NewServeMux()
	ControlAPI{Store: e.store}.Routes(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	id := e.queue(newForkJob(t, "true"))
	post := func(path, body string) (int, string) {
		resp, err := http.Post(srv.URL+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m map[string]any
		json.NewDecoder(resp.Body).Decode(&m)
		b, _ := json.Marshal(m)
		return resp.StatusCode, string(b)
	}
	if code, body := post("/v1/jobs/"+id+"/resume", ""); code != http.StatusConflict || !strings.Contains(body, "not_held") {
		t.Errorf("resume of a queued job: %d %s", code, body)
	}
	if code, body := post("/v1/jobs/"+id+"/hold", `{"reason":"maintenance"}`); code != http.StatusAccepted || !strings.Contains(body, `"request":"hold_requested"`) {
		t.Errorf("hold: %d %s", code, body)
	}
	if code, body := post("/v1/jobs/"+id+"/cancel", `{"reason":`); code != http.StatusBadRequest {
		t.Errorf("malformed body: %d %s", code, body)
	}
	if code, body := post("/v1/jobs/"+id+"/cancel", ""); code != http.StatusAccepted {
		t.Errorf("cancel: %d %s", code, body)
	}
	if code, _ := post("/v1/jobs/"+events.NewID()+"/cancel", ""); code != http.StatusNotFound {
		t.Errorf("cancel of an unknown job: %d", code)
	}
	h, _ := e.store.Load(context.Background(), id)
	last := h.Events[len(h.Events)-1]
	if last.Name != events.CancelRequested || last.Route != "local" {
		t.Errorf("last event %s routed %q; want cancel_requested routed to the job's cluster", last.Name, last.Route)
	}
	e.append(id, events.Cancelled, "", events.EndData{Reason: "test"})
	if code, body := post("/v1/jobs/"+id+"/cancel", ""); code != http.StatusConflict || !strings.Contains(body, "job_ended") {
		t.Errorf("cancel of an ended job: %d %s", code, body)
	}
}

// A cancel request the watcher made for a job past its start deadline
// (events.CancelStartDeadline) aborts the job on its target like any cancel, and ends it
// FAILED with the request's reason, not CANCELLED.
func TestStartDeadlineCancelEndsTheJobFailed(t *testing.T) {
	e := newEnv(t)
	e.run(Config{Cluster: localCluster(), ID: "x1"}, nil)
	id := e.queue(newForkJob(t, "sleep 30"))
	pid := e.waitFor(id, "RUNNING", func(s events.State) bool { return s.Status == events.StatusRunning }).NativeID
	why := "jobStartBefore: the job had not started by 2026-11-23T10:00:00Z, so it was cancelled in local's queue"
	if _, err := (ControlAPI{Store: e.store}).Request(context.Background(), id, events.CancelRequested,
		events.Note{Reason: why, Action: events.CancelStartDeadline}); err != nil {
		t.Fatal(err)
	}
	st := e.waitFor(id, "FAILED", func(s events.State) bool { return s.Status.Terminal() })
	if st.Status != events.StatusFailed || st.Reason != why {
		t.Fatalf("%s %q; want FAILED with the deadline's reason", st.Status, st.Reason)
	}
	waitProc(t, pid, "")
}
