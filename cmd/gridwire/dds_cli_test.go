package main

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gridwire/gridwire/pkg/proctest"
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
	if !regexp.MustCompile(`(?m)^name\s+main/crash_0$`).MatchString(out) || strings.Contains(out, "\npath ") {
		t.Errorf("status names a task by its path once, as its name:\n%s", out)
	}
	_, out, _ = cli(ctx, "history", "--server", server, task)
	attempts := map[string]int{}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) >= 6 && strings.HasSuffix(f[4], ".started.v1") {
			attempts[f[3]]++
		}
	}
	if len(attempts) != 3 || attempts["1"] != 1 || attempts["2"] != 1 || attempts["3"] != 1 {
		t.Fatalf("started events by attempt %v, want one in each of 1, 2, 3:\n%s", attempts, out)
	}
}

// gridwire topology update through the server: the added instance is listed, and the
// session is then cancelled whole.
func TestCLITopologyUpdate(t *testing.T) {
	server := serveCLI(t)
	dir := t.TempDir()
	topo := func(n int) string {
		return `<topology name="upd"><decltask name="s"><exe>/bin/sleep 30</exe></decltask>
<main name="main"><group name="g" n="` + string(rune('0'+n)) + `"><task>s</task></group></main></topology>`
	}
	v1, v2 := writeFile(t, dir, "v1.xml", topo(1)), writeFile(t, dir, "v2.xml", topo(2))
	ctx := context.Background()
	status, out, errOut := cli(ctx, "submit", "--json", "--server", server, v1)
	var accs []struct {
		Parent string
		Jobs   []string
	}
	if status != 0 || json.Unmarshal([]byte(out), &accs) != nil || len(accs) != 1 || accs[0].Parent == "" {
		t.Fatalf("submit: %d %s %s", status, out, errOut)
	}
	acc := accs[0]
	status, out, errOut = cli(ctx, "topology", "update", "--server", server, acc.Parent, v2)
	if status != 0 || !strings.Contains(out, "session "+acc.Parent+": 1 added, 0 removed, 1 kept") || strings.Count(out, "\n+ ") != 1 {
		t.Fatalf("topology update: exit %d\n%s%s", status, out, errOut)
	}
	added := strings.Fields(out[strings.Index(out, "\n+ ")+3:])[0]
	if status, out, errOut = cli(ctx, "topology", "update", "--server", server, acc.Parent, filepath.Join(dir, "none.xml")); status != exitUsage {
		t.Errorf("update from a missing file: exit %d %s%s, want a usage error", status, out, errOut)
	}
	// Both tasks run (the kept one, and the one the update added), so that the cancel
	// has processes to stop; their sessions must be gone once the session is cancelled.
	tasks := []string{accs[0].Jobs[1], added}
	sessions := map[string]int{}
	for _, id := range tasks {
		for i := 0; ; i++ {
			_, st, _ := cli(ctx, "status", "--json", "--server", server, id)
			var v jobView
			if json.Unmarshal([]byte(st), &v) == nil && v.Status == "RUNNING" {
				if sessions[id], _ = strconv.Atoi(v.NativeID); sessions[id] <= 1 {
					t.Fatalf("task %s runs with native ID %q, want the PID of its fork session", id, v.NativeID)
				}
				break
			}
			if i == 600 {
				t.Fatalf("task %s not running after a minute: %s", id, st)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	if status, _, errOut = cli(ctx, "cancel", "--server", server, acc.Parent); status != 0 {
		t.Fatalf("cancel: %d %s", status, errOut)
	}
	// watch's line ends with what the event says: here the session's verdict.
	if status, out, _ = cli(ctx, "watch", "--server", server, acc.Parent); status != 0 || !strings.Contains(out, " cancelled ") || !strings.Contains(out, "children cancelled; first: ") {
		t.Fatalf("watch of the cancelled session: %d\n%s", status, out)
	}
	for _, id := range tasks {
		for i := 0; ; i++ {
			_, st, _ := cli(ctx, "status", "--json", "--server", server, id)
			var v jobView
			left := sessionProcesses(sessions[id])
			if json.Unmarshal([]byte(st), &v) == nil && v.Status == "CANCELLED" && len(left) == 0 {
				break
			}
			if i == 600 {
				t.Fatalf("task %s a minute after its session's cancel: %s, processes of its session still running %v", id, st, left)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// sessionProcesses lists the live processes (zombies aside) of session sid.
func sessionProcesses(sid int) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || proctest.SessionOf(pid) != sid {
			continue
		}
		if stat, err := os.ReadFile("/proc/" + e.Name() + "/stat"); err == nil {
			if i := strings.LastIndexByte(string(stat), ')'); i > 0 && i+2 < len(stat) && stat[i+2] == 'Z' {
				continue
			}
		}
		pids = append(pids, pid)
	}
	return pids
}

// TestCLIDDSLocationExeIsUploaded: DDS's tutorial writes an unreachable exe as
// $DDS_LOCATION/..., a path DDS's commander expands on its own host. gridwire submit
// expands it from the submitter's environment, uploads that file, and the task runs the
// copy; with the variable unset, the submission is refused naming it and nothing runs.
// Before, the client looked for a file literally named "$DDS_LOCATION/...".
func TestCLIDDSLocationExeIsUploaded(t *testing.T) {
	server := serveCLI(t)
	location, dir := t.TempDir(), t.TempDir()
	writeFile(t, location, "task-type-one", "#!/bin/sh\necho \"index $1\"\n")
	if err := os.Chmod(filepath.Join(location, "task-type-one"), 0o755); err != nil {
		t.Fatal(err)
	}
	topo := writeFile(t, dir, "t1.xml", `<topology name="t1">
<decltask name="one"><exe reachable="false">$DDS_LOCATION/task-type-one %taskIndex%</exe></decltask>
<main name="main"><task>one</task></main></topology>`)
	ctx := context.Background()
	t.Setenv("DDS_LOCATION", "")
	if status, out, errOut := cli(ctx, "submit", "--server", server, topo); status != exitInvalid || !strings.Contains(errOut, "$DDS_LOCATION, which is not set") {
		t.Fatalf("submit without DDS_LOCATION: exit %d %s%s, want a refusal naming it (exit %d, the input's)", status, out, errOut, exitInvalid)
	}
	t.Setenv("DDS_LOCATION", location)
	status, out, errOut := cli(ctx, "submit", "--json", "--wait", "--server", server, topo)
	if status != 0 {
		t.Fatalf("submit: exit %d %s%s", status, out, errOut)
	}
	var ended []struct{ ID, Parent, Status string }
	if json.Unmarshal([]byte(out), &ended) != nil || len(ended) != 1 || ended[0].Parent == "" || ended[0].Status != "SUCCEEDED" {
		t.Fatalf("submit --json --wait: %s; want the one task SUCCEEDED", out)
	}
	if status, logs, errOut := cli(ctx, "logs", "--server", server, ended[0].ID); status != 0 || logs != "index 0\n" {
		t.Errorf("the task's output: exit %d %q %s; want the uploaded exe's", status, logs, errOut)
	}
}

// submit --wait of a topology follows the session's parent record, which ends once every
// task has: one event stream for the group. A stream for each task cost the server a
// consumer each, scanning the log for its job's events (a 10,000-task topology: 112 s
// and 168 CPU-s of the gateway, against 38 s and 40 CPU-s for the run alone).
func TestSubmitWaitFollowsAGroupThroughItsParent(t *testing.T) {
	server := serveCLI(t)
	target, err := url.Parse(server)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	streams := map[string]int{} // event streams asked for, by job
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.FlushInterval = -1
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/events" {
			mu.Lock()
			streams[r.URL.Query().Get("job")]++
			mu.Unlock()
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)
	topo := writeFile(t, t.TempDir(), "twelve.xml", `<topology name="twelve">
  <decltask name="w"><exe>/bin/true</exe></decltask>
  <main name="main"><group name="g" n="12"><task>w</task></group></main>
</topology>`)
	status, out, errOut := cli(context.Background(), "submit", "--wait", "--server", front.URL, topo)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if status != 0 || strings.Count(out, " SUCCEEDED\n") != 12 || !strings.HasSuffix(lines[len(lines)-1], " SUCCEEDED (12 children: 12 SUCCEEDED)") {
		t.Fatalf("submit --wait: exit %d\n%s%s\nwant 12 tasks SUCCEEDED, then the group's verdict", status, out, errOut)
	}
	group := strings.Fields(lines[len(lines)-1])[0]
	mu.Lock()
	defer mu.Unlock()
	if len(streams) != 1 || streams[group] != 1 {
		t.Fatalf("event streams by job %v: want the parent record's (%s) alone", streams, group)
	}
}

// followProxy stands between the CLI and a server, counting the event streams asked
// for by job ("" for the whole log's); cutFirstFeed makes the first stream of the whole
// log end right after the server accepted it, before any event.
func followProxy(t *testing.T, server string, cutFirstFeed bool) (string, func() map[string]int) {
	t.Helper()
	target, err := url.Parse(server)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	streams := map[string]int{}
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.FlushInterval = -1
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/events" {
			job := r.URL.Query().Get("job")
			mu.Lock()
			streams[job]++
			cut := cutFirstFeed && job == "" && streams[job] == 1
			mu.Unlock()
			if cut {
				w.Header().Set("Content-Type", "text/event-stream")
				w.WriteHeader(http.StatusOK)
				fmt.Fprint(w, ": gridwire event stream\n\n")
				w.(http.Flusher).Flush()
				return
			}
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)
	return front.URL, func() map[string]int {
		mu.Lock()
		defer mu.Unlock()
		return maps.Clone(streams)
	}
}

// followedLines checks submit --follow's output for a group of n tasks that all succeed:
// each task's events from submitted to succeeded and the group's own (submitted, its move
// to RUNNING unless its tasks all ended first, succeeded), each printed once and in order,
// then each task's end, then the group's verdict with its counts.
func followedLines(t *testing.T, out string, n int) {
	t.Helper()
	if got := strings.Count(out, " SUCCEEDED\n"); got != n {
		t.Fatalf("%d tasks SUCCEEDED, want %d:\n%s", got, n, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	last := strings.Fields(lines[len(lines)-1])
	if want := fmt.Sprintf("SUCCEEDED (%d children: %d SUCCEEDED)", n, n); len(last) == 0 || !strings.HasSuffix(lines[len(lines)-1], want) {
		t.Fatalf("the last line is %q, want the group's verdict %q:\n%s", lines[len(lines)-1], want, out)
	}
	group := last[0]
	seen := map[string][]string{}
	for _, line := range lines[:len(lines)-1] {
		if f := strings.Fields(line); len(f) >= 4 {
			seen[f[2]] = append(seen[f[2]], strings.TrimSuffix(f[3], ":"))
		}
	}
	if len(seen) != n+1 {
		t.Fatalf("events of %d jobs printed, want %d tasks and their group:\n%s", len(seen), n+1, out)
	}
	for id, names := range seen {
		want := []string{"submitted", "incarnated", "queued", "started", "exited", "staged_out", "succeeded"}
		if id == group {
			want = []string{"submitted", "status_changed", "succeeded"}
			if len(names) == 2 {
				want = slices.Delete(want, 1, 2)
			}
		}
		if strings.Join(names, " ") != strings.Join(want, " ") {
			t.Fatalf("job %s printed %v, want %v once each, in order", id, names, want)
		}
	}
}

// submit --follow of a topology follows every task on one stream of the whole log,
// opened before the submission: a stream a task cost the server a consumer each that
// looks its job's events up from the start of the log.
func TestSubmitFollowFollowsAGroupOnOneStream(t *testing.T) {
	front, streams := followProxy(t, serveCLI(t), false)
	topo := writeFile(t, t.TempDir(), "twelve.xml", `<topology name="twelve">
  <decltask name="w"><exe>/bin/true</exe></decltask>
  <main name="main"><group name="g" n="12"><task>w</task></group></main>
</topology>`)
	status, out, errOut := cli(context.Background(), "submit", "--follow", "--server", front, topo)
	if status != 0 {
		t.Fatalf("submit --follow: exit %d\n%s%s", status, out, errOut)
	}
	followedLines(t, out, 12)
	if got := streams(); len(got) != 1 || got[""] != 1 {
		t.Fatalf("event streams by job %v: want one of the whole log", got)
	}
}

// When the whole log's stream breaks before its first event, a new one could not say
// where to start without missing some: each task is then followed on its own stream,
// and no event is printed twice.
func TestSubmitFollowFallsBackToAStreamAJob(t *testing.T) {
	front, streams := followProxy(t, serveCLI(t), true)
	topo := writeFile(t, t.TempDir(), "five.xml", `<topology name="five">
  <decltask name="w"><exe>/bin/true</exe></decltask>
  <main name="main"><group name="g" n="5"><task>w</task></group></main>
</topology>`)
	status, out, errOut := cli(context.Background(), "submit", "--follow", "--server", front, topo)
	if status != 0 {
		t.Fatalf("submit --follow: exit %d\n%s%s", status, out, errOut)
	}
	followedLines(t, out, 5)
	got := streams()
	if got[""] != 1 || len(got) != 7 {
		t.Fatalf("event streams by job %v: want the cut one of the whole log, then one a task and one for the group", got)
	}
}

// The same idempotency key again returns the jobs of the first submission, whose events
// were stored before a stream opened for the second could carry them: submit --follow
// with a key of the caller's follows each job on its own, and ends.
func TestSubmitFollowWithAKeyAgainEnds(t *testing.T) {
	front, streams := followProxy(t, serveCLI(t), false)
	topo := writeFile(t, t.TempDir(), "three.xml", `<topology name="three">
  <decltask name="w"><exe>/bin/true</exe></decltask>
  <main name="main"><group name="g" n="3"><task>w</task></group></main>
</topology>`)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var outs [2]string
	for i := range outs {
		status, out, errOut := cli(ctx, "submit", "--follow", "--idempotency-key", "again-1", "--server", front, topo)
		if status != 0 {
			t.Fatalf("submit --follow #%d: exit %d\n%s%s", i+1, status, out, errOut)
		}
		followedLines(t, out, 3)
		outs[i] = out
	}
	if ends := func(out string) string {
		var s []string
		for _, l := range strings.Split(out, "\n") {
			if strings.HasSuffix(l, " SUCCEEDED") {
				s = append(s, l)
			}
		}
		sort.Strings(s)
		return strings.Join(s, "\n")
	}; ends(outs[0]) != ends(outs[1]) {
		t.Fatalf("the second submission followed other jobs:\n%s\n--\n%s", outs[0], outs[1])
	}
	if got := streams(); got[""] != 0 {
		t.Fatalf("event streams by job %v: want none of the whole log", got)
	}
}
