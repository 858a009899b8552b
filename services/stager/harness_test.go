package stager

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/events/eventstest"
	"github.com/gridwire/gridwire/pkg/bus"
)

// env is an embedded JetStream with the JOBS stream and a store, for one test.
type env struct {
	t     testing.TB
	bus   *bus.Bus
	store *events.Store
	now   time.Time
}

func newEnv(t testing.TB) *env {
	t.Helper()
	b, store := eventstest.Open(t, "test/stager")
	return &env{t: t, bus: b, store: store, now: time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)}
}

// testConfig is a config with back-off short enough for tests and no jitter, that opens
// loopback (where test servers listen) and the temporary directory (where tests keep
// their files) to every job.
func testConfig() Config {
	return Config{BackoffBase: time.Millisecond, BackoffMax: 50 * time.Millisecond,
		HTTP:      testPolicy(),
		FileRoots: []FileRoot{{Path: filepath.Clean(os.TempDir()), Access: AccessReadWrite}}}
}

// testPolicy opens loopback, where the tests' servers listen.
func testPolicy() HTTPPolicy { return HTTPPolicy{Allow: []string{"127.0.0.1", "::1"}} }

// compiled is a policy compiled, for tests that make endpoints directly.
func compiled(t testing.TB, p HTTPPolicy) hostPolicy {
	t.Helper()
	hp, err := p.compile()
	if err != nil {
		t.Fatal(err)
	}
	return hp
}

// start runs the stager until the returned stop is called (or the test ends).
func (e *env) start(cfg Config) (stop func()) {
	e.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, cfg, Deps{JS: e.bus.JS, Store: e.store, Jitter: func(d time.Duration) time.Duration { return d },
			Logger: slog.New(slog.NewTextHandler(testWriter{e.t}, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	}()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			e.t.Errorf("stager run: %v", err)
		}
	}
	e.t.Cleanup(stop)
	return stop
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}

// incarnate submits a job and incarnates it on a cluster with a fresh working directory,
// which is returned (on this machine; an ssh cluster's is a path on its host).
func (e *env) incarnate(job events.Job, cluster, workDir string) string {
	e.t.Helper()
	return e.incarnateWith(job, events.IncarnatedData{Cluster: cluster, WorkDir: workDir})
}

// incarnateWith is incarnate with the whole incarnation given (Substituted, Queue...);
// an empty WorkDir is a fresh one.
func (e *env) incarnateWith(job events.Job, inc events.IncarnatedData) string {
	e.t.Helper()
	workDir := inc.WorkDir
	ctx := context.Background()
	if job.ID == "" {
		job.ID = events.NewID()
	}
	if job.Executable == "" {
		job.Executable = "/bin/true"
	}
	if workDir == "" {
		workDir = filepath.Join(e.t.TempDir(), job.ID)
	}
	sub, err := events.New(job.ID, events.Submitted, "", e.now, job)
	if err != nil {
		e.t.Fatal(err)
	}
	if _, err := e.store.Create(ctx, sub); err != nil {
		e.t.Fatal(err)
	}
	inc.WorkDir = workDir
	e.append(job.ID, events.Incarnated, "", inc)
	return job.ID
}

func (e *env) append(id string, name events.Name, route string, payload any) {
	e.t.Helper()
	_, err := e.store.Decide(context.Background(), id, func(st events.State) ([]events.Event, error) {
		ev, err := events.New(id, name, route, e.now, payload)
		return []events.Event{ev}, err
	})
	if err != nil {
		e.t.Fatalf("appending %s: %v", name, err)
	}
}

// exit starts a queued job and makes it exit with code.
func (e *env) exit(id string, code int) {
	e.t.Helper()
	e.append(id, events.Started, "", events.StartedData{NativeID: "4242", Running: true})
	e.append(id, events.Exited, "", events.ExitedData{ExitCode: code})
}

// waitFor polls the job until cond holds; it fails the test after a generous bound
// (a liveness bound, not a speed assertion).
func (e *env) waitFor(id string, what string, cond func(events.State) bool) events.State {
	e.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		st, err := e.store.State(context.Background(), id)
		if err == nil && cond(st) {
			return st
		}
		if time.Now().After(deadline) {
			last := st.Transfers[max(0, len(st.Transfers)-3):]
			e.t.Fatalf("job %s never got %s; status %s, reason %q, %d transfers, last %+v (err %v)", id, what, st.Status, st.Reason, len(st.Transfers), last, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (e *env) waitStatus(id string, want events.Status) events.State {
	e.t.Helper()
	return e.waitFor(id, string(want), func(st events.State) bool { return st.Status == want })
}

func (e *env) waitStagedOut(id string) events.State {
	e.t.Helper()
	return e.waitFor(id, "staged_out", func(st events.State) bool { return st.StagedOut != nil })
}

func writeFile(t *testing.T, p, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func statDir(p string) (bool, error) {
	fi, err := os.Stat(p)
	if err != nil {
		return false, err
	}
	return fi.IsDir(), nil
}

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }

// names lists the job's event names in order.
func (e *env) names(id string) []events.Name { return eventstest.Names(e.t, e.store, id) }
