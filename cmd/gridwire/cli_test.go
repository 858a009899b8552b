package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gridwire/gridwire/events"
)

// cli runs the binary as main does: the exit status, stdout and stderr.
func cli(ctx context.Context, args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	status := runStatus(ctx, args, func(string) string { return "" }, &out, &errb)
	return status, out.String(), errb.String()
}

func writeFile(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// The top-level help groups the verbs, shows examples and documents the exit statuses;
// an unknown verb or a missing argument is a usage error, exit 2.
func TestHelpIsGroupedAndUsageErrorsExit2(t *testing.T) {
	status, out, _ := cli(context.Background(), "--help")
	for _, want := range []string{"Submit and follow jobs:", "Operate on jobs:", "Offline tools (no server needed):",
		"Run services:", "Examples:", "Exit status:", "6  the server could not be reached", "completion bash", ".gridwire/stdout"} {
		if status != 0 || !strings.Contains(out, want) {
			t.Errorf("gridwire --help (%d) lacks %q", status, want)
		}
	}
	if strings.Index(out, "\n  submit ") > strings.Index(out, "\n  serve ") {
		t.Errorf("client verbs should come before the daemons:\n%s", out)
	}
	for _, args := range [][]string{{"sumbit"}, {"status"}, {"status", "--no-such-flag", "x"}} {
		status, _, errOut := cli(context.Background(), args...)
		if status != exitUsage {
			t.Errorf("gridwire %v: exit %d (%s), want %d", args, status, errOut, exitUsage)
		}
	}
	if _, _, errOut := cli(context.Background(), "sumbit"); !strings.Contains(errOut, "did you mean submit") {
		t.Errorf("a typo'd verb: %q, want a suggestion", errOut)
	}
}

// Each kind of trouble has its own exit status and, with --json, a JSON error naming
// its stable code; cancel and status agree on the code of an unknown job.
func TestExitStatusesAndJSONErrors(t *testing.T) {
	server := serveCLI(t)
	ctx := context.Background()
	unknown := "01M7YSXJYJGT92HYD6NERX8N0S"
	for _, verb := range []string{"status", "cancel", "history", "watch", "logs"} {
		status, _, errOut := cli(ctx, verb, "--json", "--server", server, unknown)
		var body struct {
			Error struct {
				Code string `json:"code"`
				Exit int    `json:"exit"`
			} `json:"error"`
		}
		if err := json.Unmarshal([]byte(errOut), &body); err != nil || status != exitNotFound || body.Error.Code != "no_such_job" || body.Error.Exit != exitNotFound {
			t.Errorf("%s of an unknown job: exit %d, stderr %q (%v); want exit 4 and JSON no_such_job", verb, status, errOut, err)
		}
	}
	dir := t.TempDir()
	if status, _, errOut := cli(ctx, "submit", "--server", server, filepath.Join(dir, "missing.json")); status != exitInvalid || !strings.Contains(errOut, "missing.json") {
		t.Errorf("submit of a missing file: exit %d %q, want 3 naming it", status, errOut)
	}
	typos := writeFile(t, dir, "typos.json", "{\"version\": 3,\n \"executable\": \"/bin/true\",\n \"argumnets\": [],\n \"enviroment\": {}}\n")
	status, _, errOut := cli(ctx, "submit", "--server", server, typos)
	if status != exitInvalid || !strings.Contains(errOut, "argumnets") || !strings.Contains(errOut, "enviroment") || !strings.Contains(errOut, "2 problems") {
		t.Errorf("submit with two typos: exit %d\n%s\nwant exit 3 and both problems", status, errOut)
	}
	status, _, errOut = cli(ctx, "status", "--retries", "2", "--server", "127.0.0.1:1", unknown)
	if status != exitUnreachable || !strings.Contains(errOut, "attempt 1 of 2, retrying") || !strings.Contains(errOut, "after 2 attempts") {
		t.Errorf("status with the server down: exit %d\n%s\nwant 6 after two announced attempts", status, errOut)
	}
	status, _, errOut = cli(ctx, "watch", "--retries", "2", "--server", "127.0.0.1:1")
	if status != exitUnreachable || !strings.Contains(errOut, "attempt 1 of 2") {
		t.Errorf("watch with the server down: exit %d\n%s\nwant 6 after announced attempts", status, errOut)
	}
	if status, _, errOut := cli(ctx, "status", "--server", "ftp://x", unknown); status != exitUsage || !strings.Contains(errOut, "--server") {
		t.Errorf("a bad --server: exit %d %q", status, errOut)
	}
}

// --server takes host:port without a scheme; status prints local times with how long
// ago, or UTC with --utc; a failed job's end says why, on submit --wait and in status.
func TestServerWithoutSchemeTimesAndFailureReason(t *testing.T) {
	server := serveCLI(t)
	bare := strings.TrimPrefix(server, "http://")
	ctx := context.Background()
	dir := t.TempDir()
	missing := writeFile(t, dir, "missing.json", `{"version":3,"executable":"/no/such/program"}`)
	status, out, errOut := cli(ctx, "submit", "--wait", "--server", bare, missing)
	if status != exitFailed || !strings.Contains(out, "FAILED exit 127") || !strings.Contains(out, "stderr: ") || !strings.Contains(out, "not found") {
		t.Fatalf("submit --wait of a missing program: exit %d %q %q; want FAILED with its exit code and reason", status, out, errOut)
	}
	id := strings.Fields(out)[0]
	status, out, _ = cli(ctx, "status", "--server", bare, id)
	if status != 0 || !strings.Contains(out, " ago)") || !strings.Contains(out, "gridwire logs --stderr "+id) || strings.Contains(out, "T") && strings.Contains(out, "Z\n") {
		t.Errorf("status in local time:\n%s", out)
	}
	_, out, _ = cli(ctx, "status", "--utc", "--server", bare, id)
	if !strings.Contains(out, "Z (") {
		t.Errorf("status --utc:\n%s", out)
	}
	_, out, _ = cli(ctx, "history", "--server", bare, id)
	if strings.Contains(out, "Z ") || !strings.Contains(out, "EVENT") {
		t.Errorf("history in local time:\n%s", out)
	}
}

// With several files, a refused one does not stop the others, and a summary names it.
func TestSubmitManyFilesSummary(t *testing.T) {
	server := serveCLI(t)
	dir := t.TempDir()
	good := writeFile(t, dir, "a.json", `{"version":3,"executable":"/bin/true"}`)
	bad := writeFile(t, dir, "b.json", `{"version":3}`)
	good2 := writeFile(t, dir, "c.json", `{"version":3,"executable":"/bin/true"}`)
	status, out, errOut := cli(context.Background(), "submit", "--server", server, good, bad, good2)
	if status != exitInvalid || len(strings.Fields(out)) != 2 || !strings.Contains(errOut, "submitted 2 of 3 files (2 jobs); refused: "+bad) {
		t.Errorf("three files, one bad: exit %d\nstdout %q\nstderr %q", status, out, errOut)
	}
	status, out, _ = cli(context.Background(), "submit", "--json", "--server", server, good, bad)
	var results []accepted
	if err := json.Unmarshal([]byte(out), &results); err != nil || status != exitInvalid || len(results) != 2 ||
		len(results[0].Jobs) != 1 || results[1].Error["code"] != "invalid_description" {
		t.Errorf("--json of two files, one bad: exit %d %q (%v)", status, out, err)
	}
}

// A description over the size a server accepts is refused before any byte is sent.
func TestSubmitRefusesALargeDescriptionBeforeSending(t *testing.T) {
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { requests.Add(1) }))
	defer srv.Close()
	big := filepath.Join(t.TempDir(), "big.json")
	f, err := os.Create(big)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(60 << 20); err != nil {
		t.Fatal(err)
	}
	f.Close()
	status, _, errOut := cli(context.Background(), "submit", "--server", srv.URL, big)
	if status != exitInvalid || !strings.Contains(errOut, "over the limit") || requests.Load() != 0 {
		t.Errorf("a 60 MB description: exit %d %q, %d requests; want 3 and none sent", status, errOut, requests.Load())
	}
}

// An offline verb finds no log where it looks: it fails, not "verified 0 jobs".
func TestOfflineVerbsNeedTheirData(t *testing.T) {
	empty := t.TempDir()
	for _, args := range [][]string{{"audit", "verify", "--all"}, {"replay"}} {
		status, out, errOut := cli(context.Background(), append(args, "--data", filepath.Join(empty, "nowhere"))...)
		if status != exitNotFound || !strings.Contains(errOut, "no gridwire log in") || strings.Contains(out, "verified 0") {
			t.Errorf("%v on a missing data directory: exit %d\n%s%s", args, status, out, errOut)
		}
		if _, err := os.Stat(filepath.Join(empty, "nowhere")); err == nil {
			t.Errorf("%v created the data directory it did not find", args)
		}
	}
}

// list shows a table of jobs (ID, name, state, cluster, exit, age, reason), filters by
// state, prints JSON, and --watch prints a job again when it changes.
func TestListVerb(t *testing.T) {
	server := serveCLI(t)
	ctx := context.Background()
	dir := t.TempDir()
	ok := writeFile(t, dir, "ok.json", `{"version":3,"executable":"/bin/true"}`)
	bad := writeFile(t, dir, "bad.json", `{"version":3,"executable":"/bin/false"}`)
	_, out, _ := cli(ctx, "submit", "--wait", "--server", server, ok, bad)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 {
		t.Fatalf("submit --wait printed %q", out)
	}
	okID, badID := strings.Fields(lines[0])[0], strings.Fields(lines[1])[0]
	waitListed(t, server, okID, badID)
	status, out, errOut := cli(ctx, "list", "--server", server)
	for _, want := range []string{"ID", "NAME", "STATE", "CLUSTER", "EXIT", "AGE", "REASON", okID, badID, "SUCCEEDED", "FAILED", "local"} {
		if status != 0 || !strings.Contains(out, want) {
			t.Errorf("list (%d %s) lacks %q:\n%s", status, errOut, want, out)
		}
	}
	_, out, _ = cli(ctx, "list", "--state", "failed", "--server", server)
	if !strings.Contains(out, badID) || strings.Contains(out, okID) {
		t.Errorf("list --state failed:\n%s", out)
	}
	_, out, _ = cli(ctx, "list", "--json", "--server", server)
	var views []jobView
	if err := json.Unmarshal([]byte(out), &views); err != nil || len(views) != 2 || views[0].ID != badID {
		t.Errorf("list --json (newest first): %q %v", out, err)
	}
	if status, _, errOut := cli(ctx, "list", "--state", "bogus", "--server", server); status != exitUsage ||
		!strings.Contains(errOut, `--state "bogus": not a job state (one of submitted, incarnated,`) {
		t.Errorf("list --state bogus: exit %d %q, want 2 and the states", status, errOut)
	}
	if status, out, errOut := cli(ctx, "list", "--cluster", "nope", "--state", "failed", "--server", server); status != 0 ||
		strings.Contains(out, badID) || strings.TrimSpace(errOut) != "no job matches --state failed --cluster nope" {
		t.Errorf("list of nothing: %d %q %q, want it said", status, out, errOut)
	}

	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var mu sync.Mutex
	var wout bytes.Buffer
	done := make(chan int, 1)
	go func() {
		done <- runStatus(wctx, []string{"list", "--watch", "--server", server}, func(string) string { return "" }, lockedWriter{&mu, &wout}, &bytes.Buffer{})
	}()
	waitOutput(t, &mu, &wout, badID)
	_, out, _ = cli(ctx, "submit", "--server", server, ok)
	newID := strings.TrimSpace(out)
	waitOutput(t, &mu, &wout, newID+"  ")
	waitOutput(t, &mu, &wout, "SUCCEEDED", newID)
	cancel()
	if status := <-done; status != 0 {
		t.Errorf("list --watch ended with %d", status)
	}
}

// waitListed waits until the server's job table (a projection, a moment behind the
// log) lists every one of ids.
func waitListed(t *testing.T, server string, ids ...string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, out, _ := cli(context.Background(), "list", "--json", "--server", server)
		var views []jobView
		_ = json.Unmarshal([]byte(out), &views)
		n := 0
		for _, v := range views {
			if slices.Contains(ids, v.ID) && events.Status(v.Status).Terminal() {
				n++
			}
		}
		if n == len(ids) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the job table lists %s, not every one of %v", out, ids)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// waitOutput waits until a line of the buffer holds every one of want.
func waitOutput(t *testing.T, mu *sync.Mutex, b *bytes.Buffer, want ...string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		mu.Lock()
		s := b.String()
		mu.Unlock()
		for _, line := range strings.Split(s, "\n") {
			all := true
			for _, w := range want {
				all = all && strings.Contains(line, w)
			}
			if all {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no line with %q in:\n%s", want, s)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// version prints this program's version and the server's, which GET /v1/version serves.
func TestVersionVerb(t *testing.T) {
	server := serveCLI(t)
	status, out, _ := cli(context.Background(), "version", "--server", server)
	if status != 0 || !strings.Contains(out, "client  ") || !strings.Contains(out, "server  ") || strings.Contains(out, "not reached") {
		t.Errorf("version: %d %q", status, out)
	}
	_, out, _ = cli(context.Background(), "version", "--json", "--server", server)
	var v struct{ Client, Server versionInfo }
	if err := json.Unmarshal([]byte(out), &v); err != nil || v.Server.Go == "" || v.Client.Go == "" {
		t.Errorf("version --json: %q %v", out, err)
	}
	status, out, _ = cli(context.Background(), "version", "--server", "127.0.0.1:1")
	if status != 0 || !strings.Contains(out, "server  not reached") {
		t.Errorf("version with no server: %d %q", status, out)
	}
}

// Shell completion completes job IDs from the server, newest first, with name and state.
func TestCompletionOfJobIDs(t *testing.T) {
	server := serveCLI(t)
	dir := t.TempDir()
	job := writeFile(t, dir, "named.json", `{"version":3,"executable":"/bin/true","description":"x"}`)
	_, out, _ := cli(context.Background(), "submit", "--server", server, job)
	id := strings.TrimSpace(out)
	waitListed(t, server, id)
	for _, verb := range []string{"status", "logs", "cancel", "watch"} {
		status, out, _ := cli(context.Background(), "__complete", verb, "--server", server, id[:4])
		if status != 0 || !strings.Contains(out, id+"\t") || !strings.Contains(out, ":4") {
			t.Errorf("completion of %s %s: %d %q", verb, id[:4], status, out)
		}
	}
	status, out, _ := cli(context.Background(), "completion", "bash")
	if status != 0 || !strings.Contains(out, "__gridwire") {
		t.Errorf("completion bash: %d", status)
	}
}

// submit --follow prints each event of each job as it happens (an exit with its code),
// then how each ended.
func TestSubmitFollow(t *testing.T) {
	server := serveCLI(t)
	job := writeFile(t, t.TempDir(), "job.json", `{"version":3,"executable":"/bin/sh","arguments":["-c","exit 4"]}`)
	status, out, errOut := cli(context.Background(), "submit", "--follow", "--server", server, job)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if status != exitFailed || len(lines) < 5 {
		t.Fatalf("submit --follow: %d\n%s%s", status, out, errOut)
	}
	id := strings.Fields(lines[len(lines)-1])[0]
	for _, want := range []string{" " + id + " submitted", " " + id + " started", " " + id + " exited: exit code 4\n", " " + id + " failed"} {
		if !strings.Contains(out, want) {
			t.Errorf("submit --follow lacks %q:\n%s", want, out)
		}
	}
	if last := lines[len(lines)-1]; last != id+" FAILED exit 4" {
		t.Errorf("the last line is %q", last)
	}
}

// A long name is cut to its column; a path (a topology's task) keeps its end, where
// siblings differ, and any other name keeps its start.
func TestCutName(t *testing.T) {
	for _, c := range []struct {
		in   string
		n    int
		want string
	}{
		{"main/typeTwoGroup/TaskTypeOne_0", 20, "…Group/TaskTypeOne_0"},
		{"main/typeTwoGroup/TaskTypeOne_12", 20, "…roup/TaskTypeOne_12"},
		{"main/worker_1", 20, "main/worker_1"},
		{"a rather long job name without a path", 20, "a rather long job n…"},
		{"tabs\tand\nnewlines/in/a/name/that/is/long", 12, "…hat/is/long"},
	} {
		if got := cutName(c.in, c.n); got != c.want || len([]rune(got)) > c.n {
			t.Errorf("cutName(%q, %d) = %q, want %q", c.in, c.n, got, c.want)
		}
	}
}

// --help prints each flag's default; one taken from the environment must not be a secret
// there (a bearer token, a NATS URL with a password), though the verbs still use it.
func TestHelpShowsNoSecretFromTheEnvironment(t *testing.T) {
	env := map[string]string{"GRIDWIRE_TOKEN": "tok-s3cr3t", "GRIDWIRE_NATS_URL": "nats://gw:pw-s3cr3t@127.0.0.1:4222",
		"GRIDWIRE_NATS_PASSWORD": "pw-s3cr3t", "GRIDWIRE_NATS_TOKEN": "ntok-s3cr3t"}
	getenv := func(k string) string { return env[k] }
	for _, verb := range [][]string{{"list", "--help"}, {"serve", "--help"}, {"executor", "--help"}, {"ptp-proxy", "--help"}, {"audit", "invariants", "--help"}} {
		var out, errb bytes.Buffer
		status := runStatus(context.Background(), verb, getenv, &out, &errb)
		if status != 0 || strings.Contains(out.String()+errb.String(), "s3cr3t") || !strings.Contains(out.String(), "--") {
			t.Errorf("%v: exit %d, help shows a secret from the environment or nothing:\n%s%s", verb, status, out.String(), errb.String())
		}
	}
	var seen string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = r.Header.Get("Authorization")
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"jobs":[],"next":""}`)
	}))
	defer srv.Close()
	env["GRIDWIRE_SERVER"] = srv.URL
	var out, errb bytes.Buffer
	if status := runStatus(context.Background(), []string{"list"}, getenv, &out, &errb); status != 0 || seen != "Bearer tok-s3cr3t" {
		t.Fatalf("list with $GRIDWIRE_SERVER and $GRIDWIRE_TOKEN: exit %d, Authorization %q\n%s", status, seen, errb.String())
	}
}

// A bad config file refuses the start with exit 3, each mistake as file:line: field:
// what is wrong, and nothing made in the data directory (a bad signing key is found
// before the store is opened).
func TestServeRefusesABadConfigWithItsLines(t *testing.T) {
	dir := t.TempDir()
	base := "clusters:\n  - name: a\n    kind: fork\n    profile: fork\n"
	for _, c := range []struct {
		name, src string
		want      []string
	}{
		{"kind", "clusters:\n  - name: a\n    kind: forky\n    profile: fork\n", []string{`kind.yaml:3: clusters[0].kind: "forky" is not fork or ssh`}},
		{"types", base + "    info: {smp_size: lots}\n", []string{`types.yaml:5: clusters[0].info.smp_size: "lots" is not a whole number`}},
		{"tokens", base + "tokens:\n  - token: short\n    principal: p\n    allow: [read]\n  - token: 0123456789abcdefgh\n    principal: q\n    allow: [reed]\n",
			[]string{"tokens.yaml:6: tokens[0].token: must be at least 16 characters", `tokens.yaml:11: tokens[1].allow[0]: "reed" is not one of`}},
		{"keys", base + "signing:\n  keys:\n    - role: ingest\n      key: UBAD\n", []string{`keys.yaml:7: signing.keys[0]: `}},
		{"profile", "clusters:\n  - name: a\n    kind: fork\n    profile: nosuch\n", []string{`profile.yaml:4: clusters[0].profile: cluster a: profile "nosuch" is not in the profile set`}},
		{"profiledir", "profile_dir: /nonexistent/profiles\n" + base, []string{"profiledir.yaml:1: profile_dir: reading profile directory /nonexistent/profiles: no such file or directory"}},
		{"stager", base + "stager:\n  workers: -2\n  file_roots:\n    - path: relative\n",
			[]string{"stager.yaml:6: stager.workers: -2 is below 0", `stager.yaml:8: stager.file_roots[0].path: "relative" is not absolute`}},
	} {
		cfg := writeFile(t, dir, c.name+".yaml", c.src)
		data := filepath.Join(dir, c.name+"-data")
		status, out, errOut := cli(context.Background(), "serve", "--config", cfg, "--data", data, "--http", "127.0.0.1:0")
		for _, want := range c.want {
			if status != exitInvalid || !strings.Contains(errOut, filepath.Join(dir, want)) {
				t.Errorf("%s: exit %d %s%s, want exit %d and %q", c.name, status, out, errOut, exitInvalid, want)
			}
		}
		if _, err := os.Stat(data); err == nil {
			t.Errorf("%s: the refused start made %s", c.name, data)
		}
	}
}

// A port another process holds refuses serve before the data directory is touched,
// naming the flag to change.
func TestServeRefusesATakenPortBeforeMakingAnything(t *testing.T) {
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	dir := t.TempDir()
	for _, args := range [][]string{{"--http", held.Addr().String()}, {"--http", "127.0.0.1:0", "--ptp-listen", held.Addr().String()}} {
		data := filepath.Join(dir, "data")
		status, _, errOut := cli(context.Background(), append([]string{"serve", "--data", data}, args...)...)
		flag := args[len(args)-2]
		if status != exitInternal || !strings.Contains(errOut, flag+" "+held.Addr().String()+": the address is in use") {
			t.Errorf("serve %v: exit %d %q", args, status, errOut)
		}
		if _, err := os.Stat(data); err == nil {
			t.Errorf("serve %v: the refused start made %s", args, data)
		}
	}
}

// A word that is no verb is refused with exit 2 and the nearest verbs, at the top and
// under a verb that only groups others; cobra alone would print the help and succeed.
func TestUnknownVerbsAreRefused(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"submt"}, `unknown command "submt" for gridwire; ` + "`gridwire --help`" + ` lists them; did you mean submit?`},
		{[]string{"topology", "upd"}, `unknown command "upd" for gridwire topology; ` + "`gridwire topology --help`" + ` lists them; did you mean update?`},
		{[]string{"profiles", "list"}, `unknown command "list" for gridwire profiles`},
		{[]string{"audit", "bogus"}, `unknown command "bogus" for gridwire audit`},
	} {
		status, out, errOut := cli(context.Background(), c.args...)
		if status != exitUsage || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d %s%s, want exit %d and %q", c.args, status, out, errOut, exitUsage, c.want)
		}
	}
	for _, args := range [][]string{nil, {"audit"}, {"topology"}} {
		if status, out, _ := cli(context.Background(), args...); status != 0 || !strings.Contains(out, "Available Commands") && !strings.Contains(out, "Usage:") {
			t.Errorf("%v alone: exit %d, want its help\n%s", args, status, out)
		}
	}
}

// status --as-of shows the state a job had at a past moment, folded from the events
// recorded by then: a job that has since succeeded was RUNNING.
func TestStatusAsOf(t *testing.T) {
	server := serveCLI(t)
	ctx := context.Background()
	dir := t.TempDir()
	release := filepath.Join(dir, "release")
	job := writeFile(t, dir, "gated.json", fmt.Sprintf(`{"version":3,"description":"gated","executable":"/bin/sh",
		"arguments":["-c","while [ ! -e %s ]; do sleep 0.05; done"]}`, release))
	_, out, errOut := cli(ctx, "submit", "--server", server, job)
	id := strings.TrimSpace(out)
	if id == "" {
		t.Fatalf("submit: %s", errOut)
	}
	var running time.Time
	deadline := time.Now().Add(30 * time.Second)
	for running.IsZero() {
		if _, out, _ := cli(ctx, "status", "--json", "--server", server, id); strings.Contains(out, `"status":"RUNNING"`) {
			running = time.Now()
		} else if time.Now().After(deadline) {
			t.Fatalf("job %s never RUNNING: %s", id, out)
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(10 * time.Millisecond)
	if err := os.WriteFile(release, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for {
		if _, out, _ := cli(ctx, "status", "--json", "--server", server, id); strings.Contains(out, `"status":"SUCCEEDED"`) {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("job %s never SUCCEEDED: %s", id, out)
		}
		time.Sleep(20 * time.Millisecond)
	}
	status, out, errOut := cli(ctx, "status", "--server", server, "--as-of", running.UTC().Format(time.RFC3339Nano), id)
	if status != 0 || !strings.HasPrefix(out, "as of ") || !regexp.MustCompile(`(?m)^state\s+RUNNING$`).MatchString(out) || strings.Contains(out, "exit code") {
		t.Errorf("status --as-of while it ran: %d\n%s%s", status, out, errOut)
	}
	if status, _, errOut := cli(ctx, "status", "--server", server, "--as-of", "24h", id); status != exitNotFound || !strings.Contains(errOut, "not_yet_submitted") {
		t.Errorf("status --as-of before it was submitted: %d %s", status, errOut)
	}
	if status, _, errOut := cli(ctx, "status", "--server", server, "--as-of", "yesterday", id); status != exitUsage || !strings.Contains(errOut, `--as-of "yesterday"`) {
		t.Errorf("status --as-of yesterday: %d %s", status, errOut)
	}
}
