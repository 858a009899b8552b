package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// runCLI runs the binary's run function as a user would, with no environment but the
// consent to run jobs as root (the tests run as root on CI).
func runCLI(ctx context.Context, args ...string) (string, string, error) {
	var out, errb bytes.Buffer
	err := run(ctx, args, func(k string) string {
		if k == "GRIDWIRE_ALLOW_ROOT_JOBS" {
			return "1"
		}
		return ""
	}, &out, &errb)
	return out.String(), errb.String(), err
}

func TestServeSubmitWaitHistoryStatus(t *testing.T) {
	addr := freeAddr(t)
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() {
		_, _, err := runCLI(ctx, "serve", "--data", dir, "--http", addr, "--log-level", "error")
		served <- err
	}()
	server := "http://" + addr
	deadline := time.Now().Add(20 * time.Second)
	for {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("serve did not listen")
		}
		time.Sleep(20 * time.Millisecond)
	}

	hello := filepath.Join("..", "..", "examples", "hello.json")
	out, errOut, err := runCLI(ctx, "submit", "--wait", "--server", server, hello)
	if err != nil {
		t.Fatalf("submit --wait: %v\n%s", err, errOut)
	}
	fields := strings.Fields(out)
	if len(fields) != 2 || fields[1] != "SUCCEEDED" {
		t.Fatalf("submit --wait printed %q, want \"<id> SUCCEEDED\"", out)
	}
	id := fields[0]

	out, _, err = runCLI(ctx, "history", "--server", server, id)
	if err != nil {
		t.Fatal(err)
	}
	for _, typ := range []string{"submitted", "incarnated", "queued", "started", "exited", "staged_out", "succeeded"} {
		if !strings.Contains(out, "dev.gridwire.job."+typ+".v1") {
			t.Errorf("history lacks %s:\n%s", typ, out)
		}
	}
	if strings.Index(out, ".submitted.") > strings.Index(out, ".succeeded.") {
		t.Errorf("history out of order:\n%s", out)
	}
	// Each line says what its event says: who submitted, where it ran, how it ended.
	for _, want := range []string{"DETAIL", ".submitted.v1  ", "by anonymous", ".incarnated.v1", "for cluster local", "native id ", "exit code 0"} {
		if !strings.Contains(out, want) {
			t.Errorf("history lacks %q:\n%s", want, out)
		}
	}

	out, _, err = runCLI(ctx, "status", "--json", "--server", server, id)
	if err != nil {
		t.Fatal(err)
	}
	var v jobView
	if err := json.Unmarshal([]byte(out), &v); err != nil || v.Status != "SUCCEEDED" || v.Cluster != "local" || v.ExitCode == nil {
		t.Fatalf("status --json: %q (%v)", out, err)
	}

	// A job that fails makes submit --wait exit 1.
	bad := filepath.Join(t.TempDir(), "bad.json")
	if err := os.WriteFile(bad, []byte(`{"version":3,"executable":"/bin/false"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	out, _, err = runCLI(ctx, "submit", "--wait", "--server", server, bad)
	var ec exitCode
	if !errors.As(err, &ec) || ec != 1 || !strings.Contains(out, "FAILED") {
		t.Fatalf("submit --wait of a failing job: %q, %v; want FAILED and exit 1", out, err)
	}

	// A description naming a local input file: submit uploads it, the job reads it.
	jobDir := t.TempDir()
	payload := "uploaded with the job\n\x00 and binary \xff bytes\n"
	if err := os.MkdirAll(filepath.Join(jobDir, "data"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(jobDir, "data", "in.txt"), []byte(payload), 0o644); err != nil {
		t.Fatal(err)
	}
	withInput := filepath.Join(jobDir, "cat.json")
	if err := os.WriteFile(withInput, []byte(`{"version":3,"executable":"/bin/cat","arguments":["in.txt"],
		"input_files":{"in.txt":"data/in.txt"}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errOut, err = runCLI(ctx, "submit", "--wait", "--server", server, withInput)
	if err != nil || !strings.Contains(out, "SUCCEEDED") {
		t.Fatalf("submit with a local input: %q %v\n%s", out, err, errOut)
	}
	catID := strings.Fields(out)[0]
	got, err := os.ReadFile(filepath.Join(dir, "jobs", catID, ".gridwire", "stdout"))
	if err != nil || string(got) != payload {
		t.Fatalf("the job read %q (%v), want the uploaded file's bytes", got, err)
	}
	if !strings.Contains(errOut, fmt.Sprintf("uploading in.txt (%d bytes)\n", len(payload))) || strings.Contains(errOut, "\r") {
		t.Errorf("the upload not said in one line (stderr is not a terminal): %q", errOut)
	}

	// Unknown job: a clear 404 from the API.
	if _, _, err := runCLI(ctx, "status", "--server", server, "01M7YSXJYJGT92HYD6NERX8N0S"); err == nil || !strings.Contains(err.Error(), "no_such_job") {
		t.Fatalf("status of an unknown job: %v", err)
	}

	cancel()
	select {
	case err := <-served:
		if err != nil && !errors.Is(err, context.Canceled) {
			t.Fatalf("serve ended with %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("serve did not stop")
	}

	// Nothing was configured, yet every event is signed by its service's role key, made
	// in the data directory on first start (0600), and the audit trusts those keys.
	for _, role := range []string{"ingest", "incarnator", "stager", "executor", "watcher"} {
		fi, err := os.Stat(filepath.Join(dir, "keys", role+".seed"))
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("key of %s: %v %v", role, fi, err)
		}
	}
	out, _, err = runCLI(context.Background(), "audit", "verify", "--all", "--data", dir)
	if err != nil || !strings.Contains(out, "verified 3 jobs") || !strings.Contains(out, ": 0 broken") || strings.Contains(out, "unsigned") {
		t.Fatalf("audit verify after make run: %v\n%s", err, out)
	}
	out, _, err = runCLI(context.Background(), "keys", "--data", dir)
	if err != nil || strings.Count(out, "- {role: ") != 5 || !strings.HasPrefix(out, "signing:\n  keys:\n") {
		t.Fatalf("keys: %v\n%s", err, out)
	}
}

func TestNormalizeNeedsNoServer(t *testing.T) {
	out, _, err := runCLI(context.Background(), "normalize", filepath.Join("..", "..", "examples", "hello.json"))
	if err != nil {
		t.Fatal(err)
	}
	var jobs []map[string]any
	if err := json.Unmarshal([]byte(out), &jobs); err != nil || len(jobs) != 1 || jobs[0]["executable"] != "/bin/echo" {
		t.Fatalf("normalize printed %q (%v)", out, err)
	}
	bad := filepath.Join(t.TempDir(), "bad.json")
	_ = os.WriteFile(bad, []byte(`{"version":3}`), 0o644)
	_, errOut, err := runCLI(context.Background(), "normalize", bad)
	var ec exitCode
	if !errors.As(err, &ec) || ec != exitInvalid || !strings.Contains(errOut, "bad.json:") {
		t.Fatalf("normalize of an invalid file: %v, stderr %q; want exit 3 naming the file", err, errOut)
	}
}
