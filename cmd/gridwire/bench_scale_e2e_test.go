//go:build e2e

package main

import (
	"context"
	"encoding/json"
	"os/exec"
	"runtime"
	"strings"
	"testing"
)

// --scale --nats-server keeps the log in an official nats-server process: the RSS row
// is then gridwire's process alone (no subject index in its heap: the server package's
// own globals are at most a sample of the heap profile) and the server's RSS is
// measured apart; the log it built is the embedded server's layout, so a run without
// --nats-server reuses it (and the other way round), and the server is stopped after.
func TestBenchScaleExternalServer(t *testing.T) {
	// Sample the heap finely. At the default rate each sampled allocation stands for
	// about 512 KiB, so the server package's globals (about 80 KB, measured with
	// GODEBUG=memprofilerate=1) read as 0, 0.5, 1 or more MiB by chance, while the
	// embedded server's whole heap on a log of 200 jobs is about 2 MiB.
	defer func(rate int) { runtime.MemProfileRate = rate }(runtime.MemProfileRate)
	runtime.MemProfileRate = 4096
	out, err := exec.Command("bash", "../../scripts/install-nats-server.sh").Output()
	if err != nil {
		t.Fatalf("installing nats-server: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	bin := lines[len(lines)-1]
	data := t.TempDir()
	run := func(external bool) benchResult {
		t.Helper()
		args := []string{"bench", "--json", "--allow-root-jobs", "--data", data, "--scale", "200", "--read-jobs", "10", "--no-replay"}
		if external {
			args = append(args, "--nats-server", bin)
		}
		status, out, errOut := cli(context.Background(), args...)
		if status != 0 {
			t.Fatalf("bench %v: exit %d: %s", args, status, errOut)
		}
		var r benchResult
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	ext := run(true)
	if s := ext.Scale; ext.LogJobs != 200 || ext.Reads.JobP50 <= 0 || s == nil || !s.ExternalServer || s.ServerRSSMiB <= 0 ||
		s.AfterReads.ServerRSSMiB <= 0 || s.CaughtUp.SubjectTreesMiB != 0 || s.CaughtUp.ServerMiB > 0.5 || s.CaughtUp.GridwireMiB <= 0 {
		t.Errorf("--nats-server: %+v, scale rows %+v", ext, ext.Scale)
	}
	if out, _ := exec.Command("pgrep", "-f", "gridwire-bench").Output(); len(out) > 0 {
		t.Errorf("the nats-server is still running: %s", out)
	}
	emb := run(false)
	if s := emb.Scale; emb.FillSeconds != 0 || emb.LogEvents != ext.LogEvents || s == nil || s.ExternalServer ||
		s.CaughtUp.SubjectTreesMiB <= 0 || s.CaughtUp.ServerMiB < 2*ext.Scale.CaughtUp.ServerMiB+0.5 {
		t.Errorf("embedded on the external server's log: %+v, scale rows %+v", emb, emb.Scale)
	}
	if again := run(true); again.FillSeconds != 0 || again.LogEvents != ext.LogEvents {
		t.Errorf("external on the embedded server's log: %+v", again)
	}
}
