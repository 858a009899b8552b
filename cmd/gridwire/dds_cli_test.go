package main

import (
	"context"
	"regexp"
	"strings"
	"testing"
)

// Through the real server (signed events, every service): a crashing task with
// RestartTask 2 runs three times; submit --wait waits for the last attempt, status
// names it, and history marks each event with its attempt.
func TestCLIHistoryShowsAttempts(t *testing.T) {
	server := serveCLI(t)
	dir := t.TempDir()
	topo := writeFile(t, dir, "crash.xml", `<topology name="crashy">
  <decltrigger name="again" condition="TaskCrashed" action="RestartTask" arg="2"/>
  <decltask name="crash"><exe>/bin/sh -c 'exit 5'</exe><triggers><name>again</name></triggers></decltask>
  <main name="main"><task>crash</task></main>
</topology>`)
	ctx := context.Background()
	status, out, errOut := cli(ctx, "submit", "--wait", "--server", server, topo)
	if status != exitFailed || !strings.Contains(out, " FAILED exit 5") {
		t.Fatalf("submit --wait: exit %d\n%s%s\nwant the task FAILED with exit 5 after its last attempt", status, out, errOut)
	}
	task := strings.Fields(out)[0]
	if _, out, _ = cli(ctx, "status", "--server", server, task); !regexp.MustCompile(`(?m)^attempt\s+3$`).MatchString(out) {
		t.Errorf("status does not name attempt 3:\n%s", out)
	}
	_, out, _ = cli(ctx, "history", "--server", server, task)
	attempts := map[string]int{}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) == 6 && strings.HasSuffix(f[4], ".started.v1") {
			attempts[f[3]]++
		}
	}
	if len(attempts) != 3 || attempts["1"] != 1 || attempts["2"] != 1 || attempts["3"] != 1 {
		t.Fatalf("started events by attempt %v, want one in each of 1, 2, 3:\n%s", attempts, out)
	}
}
