package executor

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/events/eventstest"
	"github.com/gridwire/gridwire/pkg/bus"
	"github.com/gridwire/gridwire/pkg/cluster"
)

// Scripts as the shipped fork profile renders them (the incarnator's tests check the
// rendering; these tests check what the executor does with rendered scripts).
const (
	forkStart = `cd "$GW_WORKDIR" || exit 1
setsid /bin/sh "$GW_WORKDIR"/.gridwire/job.sh </dev/null >/dev/null 2>&1 &
echo "$!"
`
	forkPattern = `^\s*([0-9]+)\s*$`
	forkHold    = `kill -STOP -"$GW_NATIVE_ID" 2>/dev/null || kill -STOP "$GW_NATIVE_ID"`
	forkResume  = `kill -CONT -"$GW_NATIVE_ID" 2>/dev/null || kill -CONT "$GW_NATIVE_ID"`
	forkAbort   = `kill -TERM -"$GW_NATIVE_ID" 2>/dev/null || { kill -TERM "$GW_NATIVE_ID" 2>/dev/null; kill -TERM -"$GW_NATIVE_ID" 2>/dev/null; }; kill -CONT -"$GW_NATIVE_ID" 2>/dev/null || kill -CONT "$GW_NATIVE_ID" 2>/dev/null; exit 0`
)

// jobScript is a JOB script in the shape the incarnator renders: prologue, the program
// in a subshell, then the epilogue writing the exit status atomically.
func jobScript(wd, program string) string {
	return "#!/bin/sh\nGW_WORKDIR='" + wd + "'\ncd \"$GW_WORKDIR\" || exit 111\n(\n" + program +
		"\n) </dev/null >\"$GW_WORKDIR\"/.gridwire/stdout 2>\"$GW_WORKDIR\"/.gridwire/stderr\nGW_EXIT=$?\n" +
		"printf '%s\\n' \"$GW_EXIT\" > \"$GW_WORKDIR\"/.gridwire/exit_status.tmp &&\n" +
		"  mv -f \"$GW_WORKDIR\"/.gridwire/exit_status.tmp \"$GW_WORKDIR\"/.gridwire/exit_status\nexit \"$GW_EXIT\"\n"
}

// forkIncarnation is an incarnation on the fork profile with program as the job.
func forkIncarnation(cl, wd, program string) events.IncarnatedData {
	return events.IncarnatedData{Cluster: cl, Profile: "fork", WorkDir: wd, NativeIDPattern: forkPattern,
		Scripts: map[string]events.Script{
			events.ScriptJob: {Body: jobScript(wd, program)}, events.ScriptStart: {Body: forkStart},
			events.ScriptHold: {Body: forkHold}, events.ScriptResume: {Body: forkResume}, events.ScriptAbort: {Body: forkAbort},
		}}
}

// env is an embedded JetStream with the JOBS stream and a store, for one test.
type env struct {
	t     testing.TB
	bus   *bus.Bus
	store *events.Store
}

func newEnv(t testing.TB) *env {
	t.Helper()
	b, store := eventstest.Open(t, "test/executor")
	return &env{t: t, bus: b, store: store}
}

// queue submits, incarnates and queues a job on the incarnation's cluster.
func (e *env) queue(inc events.IncarnatedData) string {
	e.t.Helper()
	id := filepath.Base(inc.WorkDir)
	sub, err := events.New(id, events.Submitted, "", time.Now(), events.Job{ID: id, Executable: "/bin/true"})
	if err != nil {
		e.t.Fatal(err)
	}
	if _, err := e.store.Create(context.Background(), sub); err != nil {
		e.t.Fatal(err)
	}
	e.append(id, events.Incarnated, "", inc)
	e.append(id, events.Queued, inc.Cluster, events.QueuedData{Cluster: inc.Cluster})
	return id
}

func (e *env) append(id string, name events.Name, route string, payload any) {
	e.t.Helper()
	_, err := e.store.Decide(context.Background(), id, func(st events.State) ([]events.Event, error) {
		ev, err := events.New(id, name, route, time.Now(), payload)
		return []events.Event{ev}, err
	})
	if err != nil {
		e.t.Fatalf("appending %s: %v", name, err)
	}
}

// run runs an executor for the cluster until the test ends.
func (e *env) run(cfg Config, target Target) {
	e.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, cfg, Deps{JS: e.bus.JS, Conn: e.bus.Conn, Store: e.store, Target: target,
			Logger: slog.New(slog.NewTextHandler(testWriter{e.t}, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	}()
	e.t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			e.t.Errorf("executor run: %v", err)
		}
	})
}

// waitFor polls the job until cond holds; the bound only keeps a broken test from
// hanging, it asserts nothing about speed.
func (e *env) waitFor(id, what string, cond func(events.State) bool) events.State {
	e.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, err := e.store.State(context.Background(), id)
		if err == nil && cond(st) {
			return st
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("job %s: waited for %s; state %s (%v)", id, what, st.Status, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func localCluster() cluster.Cluster {
	return cluster.Cluster{Name: "local", Kind: cluster.KindFork, Profile: "fork", LRMS: "Fork", AllowRoot: true}
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// waitFile waits for a file a job writes; the bound only keeps a broken test from hanging.
func waitFile(t testing.TB, path string) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		b, err := os.ReadFile(path)
		if err == nil && len(b) > 0 {
			return string(b)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never appeared", path)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// procState is the ps state letter of a process ("" when it is gone).
func procState(pid string) string {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return ""
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 >= len(s) {
		return ""
	}
	return s[i+2 : i+3]
}

// waitProc waits until the process is in one of the states ("" = gone or a zombie).
func waitProc(t testing.TB, pid string, want ...string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := procState(pid)
		if got == "Z" {
			got = ""
		}
		for _, w := range want {
			if got == w {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("process %s: state %q, want one of %q", pid, got, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// names lists the job's event names in order.
func (e *env) names(id string) []events.Name { return eventstest.Names(e.t, e.store, id) }

func count(names []events.Name, n events.Name) int { return eventstest.Count(names, n) }
