package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/services/ingest"
)

func TestJobSucceedsEndToEnd(t *testing.T) {
	h := newHarness(t)
	id := h.submitJSON(map[string]any{"version": 3, "executable": "/bin/echo", "arguments": []string{"hello,", "world"}})
	st := h.waitEnd(id)
	if st.Status != events.StatusSucceeded || st.ExitCode == nil || *st.ExitCode != 0 {
		t.Fatalf("state %s exit %v reason %q, want SUCCEEDED with 0", st.Status, st.ExitCode, st.Reason)
	}
	out, err := os.ReadFile(filepath.Join(h.workDir(id), events.StdoutFile))
	if err != nil || string(out) != "hello, world\n" {
		t.Fatalf("stdout %q (%v)", out, err)
	}
	want := []events.Name{events.Submitted, events.Incarnated, events.Queued, events.Started, events.Exited,
		events.StagedOut, events.Succeeded}
	evs := h.history(id)
	var got []events.Name
	for _, e := range evs {
		got = append(got, e.Name)
	}
	if len(got) != len(want) {
		t.Fatalf("history %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("history %v, want %v", got, want)
		}
	}
	h.assertCleanHistory(id)
}

func TestExitCodeThreeFails(t *testing.T) {
	h := newHarness(t)
	id := h.submitJSON(map[string]any{"version": 3, "executable": "/bin/sh", "arguments": []string{"-c", "exit 3"}})
	st := h.waitEnd(id)
	if st.Status != events.StatusFailed || st.ExitCode == nil || *st.ExitCode != 3 {
		t.Fatalf("state %s exit %v, want FAILED with 3", st.Status, st.ExitCode)
	}
	h.assertCleanHistory(id)
}

// A value like $(touch canary) must reach the program as one literal argument, in
// arguments and in the environment, and nothing may run.
func TestHostileValuesReachTheProgramLiterally(t *testing.T) {
	h := newHarness(t)
	hostile := []string{"$(touch canary)", "`touch canary`", "'; touch canary; '", "a b", "*", "-rf", "line1\nline2", ""}
	args := append([]string{"-c", `for a in "$@"; do printf '[%s]' "$a"; done; printf '{%s}' "$X"`, "sh"}, hostile...)
	id := h.submitJSON(map[string]any{"version": 3, "executable": "/bin/sh", "arguments": args,
		"environment": map[string]string{"x": "$(touch canary)"}})
	st := h.waitEnd(id)
	if st.Status != events.StatusSucceeded {
		t.Fatalf("state %s (%s)", st.Status, st.Reason)
	}
	out, err := os.ReadFile(filepath.Join(h.workDir(id), events.StdoutFile))
	if err != nil {
		t.Fatal(err)
	}
	want := ""
	for _, v := range hostile {
		want += "[" + v + "]"
	}
	want += "{$(touch canary)}"
	if string(out) != want {
		t.Fatalf("program saw\n%q\nwant\n%q", out, want)
	}
	for _, dir := range []string{h.workDir(id), h.dir, "."} {
		if _, err := os.Stat(filepath.Join(dir, "canary")); err == nil {
			t.Fatalf("a hostile value ran: %s/canary exists", dir)
		}
	}
}

// Stopping a service before its part of a job and starting it again later ends the job
// right, with no event twice.
func TestServiceRestartBeforeItsTurn(t *testing.T) {
	for _, name := range []string{"incarnator", "stager", "executor", "watcher"} {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t)
			h.stop(name)
			id := h.submitJSON(gated())
			h.start(name)
			h.waitFor(id, "RUNNING", isRunning)
			h.release(id, "0")
			if st := h.waitEnd(id); st.Status != events.StatusSucceeded {
				t.Fatalf("state %s (%s)", st.Status, st.Reason)
			}
			h.assertCleanHistory(id)
		})
	}
}

// Stopping a service while the job runs (the executor that started it, the watcher
// that follows it, ...) does not kill the job or lose its end.
func TestServiceRestartWhileRunning(t *testing.T) {
	for _, name := range []string{"executor", "watcher", "stager", "incarnator"} {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t)
			id := h.submitJSON(gated())
			h.waitFor(id, "RUNNING", isRunning)
			h.stop(name)
			h.release(id, "4") // the job ends while the service is down
			h.start(name)
			st := h.waitEnd(id)
			if st.Status != events.StatusFailed || st.ExitCode == nil || *st.ExitCode != 4 {
				t.Fatalf("state %s exit %v (%s), want FAILED with 4", st.Status, st.ExitCode, st.Reason)
			}
			h.assertCleanHistory(id)
		})
	}
}

// The NATS server itself restarts on the same store while a job runs; every service
// reconnects and the job still ends right.
func TestEmbeddedServerRestartMidJob(t *testing.T) {
	h := newHarness(t)
	id := h.submitJSON(gated())
	h.waitFor(id, "RUNNING", isRunning)
	h.restartServer()
	h.release(id, "0")
	if st := h.waitEnd(id); st.Status != events.StatusSucceeded {
		t.Fatalf("state %s (%s)", st.Status, st.Reason)
	}
	h.assertCleanHistory(id)
	// And a job submitted after the restart runs too.
	id2 := h.submitJSON(map[string]any{"version": 3, "executable": "/bin/true"})
	if st := h.waitEnd(id2); st.Status != events.StatusSucceeded {
		t.Fatalf("after restart: state %s (%s)", st.Status, st.Reason)
	}
}

// A file the stager cannot move is refused at submission, naming what is supported,
// and nothing reaches the log.
func TestUnsupportedSchemeRefusedAtSubmission(t *testing.T) {
	h := newHarness(t)
	before, err := h.server.JS.Stream(context.Background(), events.Stream)
	if err != nil {
		t.Fatal(err)
	}
	n := before.CachedInfo().State.Msgs
	doc := []byte(`{"version":3,"executable":"/bin/true","input_files":{"in.txt":"gsiftp://example.org/in.txt"}}`)
	_, err = h.submit.Submit(context.Background(), ingest.Submission{File: "grid.json", Data: doc})
	if !errors.Is(err, ingest.ErrInvalid) || !strings.Contains(err.Error(), "gsiftp") || !strings.Contains(err.Error(), "sftp") {
		t.Fatalf("submitting a gsiftp input: %v; want a refusal naming the scheme and the supported ones", err)
	}
	after, _ := h.server.JS.Stream(context.Background(), events.Stream)
	if got := after.CachedInfo().State.Msgs; got != n {
		t.Fatalf("a refused document appended %d events", got-n)
	}
}
