package main

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// logs prints what a job wrote, stdout or stderr, the last lines with --tail, and with
// --follow the output as it grows until the job ends.
func TestLogsVerb(t *testing.T) {
	server := serveCLI(t)
	dir := t.TempDir()
	gate := writeFile(t, dir, "gated.json", `{"version":3,"executable":"/bin/sh","arguments":["-c",
		"echo first; echo err1 >&2; while [ ! -e release ]; do sleep 0.05; done; echo second; echo third"]}`)
	_, out, _ := cli(context.Background(), "submit", "--server", server, gate)
	id := strings.TrimSpace(out)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	var followed bytes.Buffer
	done := make(chan int, 1)
	go func() {
		done <- runStatus(ctx, []string{"logs", "--follow", "--server", server, id}, func(string) string { return "" },
			lockedWriter{&mu, &followed}, &bytes.Buffer{})
	}()
	waitOutput(t, &mu, &followed, "first") // printed while the job still runs
	status, out, _ := cli(context.Background(), "status", "--server", server, id)
	if status != 0 || !strings.Contains(out, "RUNNING") {
		t.Fatalf("the job should still run: %s", out)
	}
	writeFile(t, workDirOf(t, server, id), "release", "")
	if status := <-done; status != 0 {
		t.Fatalf("logs --follow ended with %d", status)
	}
	if got := followed.String(); got != "first\nsecond\nthird\n" {
		t.Errorf("logs --follow printed %q", got)
	}
	if status, out, _ := cli(context.Background(), "logs", "--server", server, id); status != 0 || out != "first\nsecond\nthird\n" {
		t.Errorf("logs: %d %q", status, out)
	}
	if _, out, _ := cli(context.Background(), "logs", "--stderr", "--server", server, id); out != "err1\n" {
		t.Errorf("logs --stderr: %q", out)
	}
	if _, out, _ := cli(context.Background(), "logs", "--tail", "2", "--server", server, id); out != "second\nthird\n" {
		t.Errorf("logs --tail 2: %q", out)
	}
}

// workDirOf is the job's working directory, as its incarnation recorded it.
func workDirOf(t *testing.T, server, id string) string {
	t.Helper()
	c := (&clientFlags{server: server, retries: 1}).mustClient(t)
	evs, err := c.history(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		var d struct {
			WorkDir string `json:"work_dir"`
		}
		if e.Name == "incarnated" && jsonUnmarshal(e.Data, &d) == nil && d.WorkDir != "" {
			return d.WorkDir
		}
	}
	t.Fatalf("job %s has no working directory yet", id)
	return ""
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

// status points at the job's standard error only when the job ran: a job that failed
// before it started has none, and `logs --stderr` would only say so.
func TestStatusPointsAtStandardErrorOnlyForAJobThatRan(t *testing.T) {
	server := serveCLI(t)
	dir := t.TempDir()
	ran := writeFile(t, dir, "ran.json", `{"version":3,"executable":"/bin/sh","arguments":["-c","echo oops >&2; exit 3"]}`)
	never := writeFile(t, dir, "never.json", `{"version":3,"executable":"/bin/true","input_files":{"in":"http://127.0.0.1:1/in"}}`)
	for _, c := range []struct {
		file string
		hint bool
	}{{ran, true}, {never, false}} {
		_, out, errOut := cli(context.Background(), "submit", "--wait", "--server", server, c.file)
		id, _, _ := strings.Cut(strings.TrimSpace(out), " ")
		if !strings.Contains(out, "FAILED") {
			t.Fatalf("%s: %q %q", c.file, out, errOut)
		}
		_, out, _ = cli(context.Background(), "status", "--server", server, id)
		if got := strings.Contains(out, "gridwire logs --stderr"); got != c.hint {
			t.Errorf("%s: status names logs --stderr: %v, want %v:\n%s", filepath.Base(c.file), got, c.hint, out)
		}
	}
}
