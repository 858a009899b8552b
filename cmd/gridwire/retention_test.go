package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/pkg/cluster"
)

// A fork cluster with retention 0: the working directory of every job that ended, as it
// succeeded or failed, is removed by the profile's DELETE once the job has ended, the
// removal follows the end in the job's log, and the log still verifies and satisfies
// every invariant.
func TestRetentionZeroOnAForkCluster(t *testing.T) {
	cfg := cluster.Default()
	cfg.Clusters[0].Retention = &cluster.Retention{}
	h := newHarnessWith(t, cfg)
	ok := h.submitJSON(map[string]any{"version": 3, "executable": "/bin/sh", "arguments": []string{"-c", "echo kept > out.txt"}})
	bad := h.submitJSON(map[string]any{"version": 3, "executable": "/bin/sh", "arguments": []string{"-c", "exit 3"}})
	for id, want := range map[string]events.Status{ok: events.StatusSucceeded, bad: events.StatusFailed} {
		st := h.waitFor(id, "directory_deleted", func(st events.State) bool { return st.DirectoryDeleted != nil })
		checkDeleted(t, h, st, want)
	}
	checkAudit(t, h, ok, bad)
}

// checkDeleted checks the fact of a job whose directory the profile's DELETE removed.
func checkDeleted(t *testing.T, h *harness, st events.State, want events.Status) {
	t.Helper()
	f := st.DirectoryDeleted
	if st.Status != want || !f.OK || f.Script != events.ScriptDelete || len(f.Paths) != 1 || f.Paths[0] != st.Incarnation.WorkDir {
		t.Fatalf("job %s: %s, fact %+v", st.JobID, st.Status, f)
	}
	if _, err := os.Stat(st.Incarnation.WorkDir); !os.IsNotExist(err) {
		t.Fatalf("job %s: its directory is still there: %v", st.JobID, err)
	}
	evs := h.history(st.JobID)
	if last := evs[len(evs)-1]; last.Name != events.DirectoryDeleted || !evs[len(evs)-2].Name.Terminal() {
		t.Fatalf("job %s: the last events are %s, %s", st.JobID, evs[len(evs)-2].Name, last.Name)
	}
	h.assertCleanHistory(st.JobID)
}

// checkAudit runs audit verify and audit invariants over the harness's log.
func checkAudit(t *testing.T, h *harness, ids ...string) {
	t.Helper()
	ctx := context.Background()
	url := "--nats-url=" + h.natsURL()
	expect := filepath.Join(t.TempDir(), "acknowledged")
	if err := os.WriteFile(expect, []byte(strings.Join(ids, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, _, err := runCLI(ctx, "audit", "invariants", "--expect", expect, url); err != nil {
		t.Fatalf("audit invariants: %v\n%s", err, out)
	}
	out, _, err := runCLI(ctx, "audit", "verify", "--all", url, "--signing-keys="+h.keysDir())
	if err != nil || !strings.Contains(out, fmt.Sprintf("verified %d jobs", len(ids))) || !strings.Contains(out, ": 0 broken") {
		t.Fatalf("audit verify: %v\n%s", err, out)
	}
}

// The profile that uses every part of the spec deletes with a static script (DELETE in
// BIN storage, installed before it runs); the retention is read from the config file.
func TestRetentionRunsAStaticDelete(t *testing.T) {
	cfg, err := cluster.Parse("gpe.yaml", []byte(fmt.Sprintf(`profile_dir: %q
clusters:
  - name: local
    kind: fork
    profile: gpe-full
    lrms: Fork
    retention: 0
    fields: {SCRATCH_BASE: %q}
    info: {os_name: Linux}
`, gpeProfileDir(t), t.TempDir())))
	if err != nil {
		t.Fatal(err)
	}
	h := newHarnessWith(t, cfg)
	id := h.submitJSON(map[string]any{"version": 3, "executable": "/bin/true",
		"x-gpe": map[string]any{"application": "report", "application_version": "1.0"}})
	st := h.waitFor(id, "directory_deleted", func(st events.State) bool { return st.DirectoryDeleted != nil })
	if !strings.Contains(st.Incarnation.Scripts[events.ScriptDelete].Body, "gpe-delete") {
		t.Fatalf("DELETE is not the static script: %q", st.Incarnation.Scripts[events.ScriptDelete].Body)
	}
	checkDeleted(t, h, st, events.StatusSucceeded)
	checkAudit(t, h, id)
}

// Once its cluster's retention removed a job's directory, `logs` says the output is
// gone and where it was (exit 4, as for any data that is not there), and `history`
// says what was removed.
func TestLogsOfARemovedDirectory(t *testing.T) {
	dir := t.TempDir()
	cfg := writeFile(t, dir, "gw.yaml", "clusters:\n  - {name: local, kind: fork, profile: fork, retention: 0}\n")
	server := serveCLI(t, "--config", cfg)
	ctx := context.Background()
	status, out, errOut := cli(ctx, "submit", "--wait", "--server", server, writeFile(t, dir, "a.json", `{"version":3,"executable":"/bin/echo","arguments":["hi"]}`))
	if status != 0 {
		t.Fatalf("submit: %d %s %s", status, out, errOut)
	}
	id := strings.Fields(out)[0]
	deadline := time.Now().Add(60 * time.Second)
	for {
		_, hist, _ := cli(ctx, "history", "--server", server, id)
		if strings.Contains(hist, ".directory_deleted.v1") {
			if !regexp.MustCompile(`directory_deleted\.v1 .* removed /\S+/` + id + `( on \S+)?\n`).MatchString(hist) {
				t.Errorf("history does not say what was removed:\n%s", hist)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the directory was never removed:\n%s", hist)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if status, _, errOut := cli(ctx, "logs", "--server", server, id); status != exitNotFound || !strings.Contains(errOut, "output_gone") {
		t.Errorf("logs of a removed directory: exit %d %q, want %d and output_gone", status, errOut, exitNotFound)
	}
}
