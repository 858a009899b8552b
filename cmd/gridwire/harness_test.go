package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/pkg/bus"
	"github.com/gridwire/gridwire/pkg/cluster"
	"github.com/gridwire/gridwire/pkg/natsfault"
	"github.com/gridwire/gridwire/pkg/proctest"
	"github.com/gridwire/gridwire/services/executor"
	"github.com/gridwire/gridwire/services/ingest"
	"golang.org/x/sync/errgroup"
)

// harness runs a real embedded nats-server with a file store, listening on loopback,
// and each service as its own client of it, as separate processes would be, so a test
// can stop and restart any one of them, or the server itself, in the middle of a job.
type harness struct {
	t      *testing.T
	cfg    cluster.Config // the operator's config the services run with
	dir    string
	listen string
	server *bus.Bus
	client *bus.Bus
	store  *events.Store
	submit *ingest.Service
	// faults, in fault tests, reach every service's JetStream client and every append
	// its store sends; nil: none.
	faults *natsfault.Injector

	mu       sync.Mutex
	services map[string]*running
}

type running struct {
	cancel context.CancelFunc
	done   chan error
	sys    *system
}

func newHarness(t *testing.T) *harness { return newHarnessWith(t, cluster.Default()) }

// newHarnessWith runs the named services (all by default) with the operator's config.
func newHarnessWith(t *testing.T, cfg cluster.Config, services ...string) *harness {
	t.Helper()
	return newHarnessFaulty(t, cfg, nil, services...)
}

// newHarnessFaulty is newHarnessWith whose services suffer in's faults (nil: none): in
// their JetStream clients, and in every append their stores send.
func newHarnessFaulty(t *testing.T, cfg cluster.Config, in *natsfault.Injector, services ...string) *harness {
	t.Helper()
	h := &harness{t: t, cfg: cfg, dir: t.TempDir(), services: map[string]*running{}, faults: in}
	h.startServer("127.0.0.1:0")
	cl, err := bus.Open(context.Background(), bus.Config{URL: h.natsURL(), Name: "test-client"})
	if err != nil {
		t.Fatal(err)
	}
	h.client = cl
	// The harness submits as ingest does, with ingest's key from the services' key
	// directory, so the log it makes verifies.
	h.store = h.roleStore(events.RoleIngest)
	stg, err := stagerSection(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if h.submit, err = ingest.New(ingest.Config{}, ingest.Deps{Store: h.store, Sessions: h.store, Check: stg.CheckURLs, Keys: ingest.KVKeys{JS: cl.JS}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.close)
	if len(services) == 0 {
		services = allServices
	}
	for _, name := range services {
		h.start(name)
	}
	return h
}

// roleStore is a store on the harness's client signing as role, with the key the
// harness's services use (made in <dir>/keys when none is there yet).
func (h *harness) roleStore(role events.Role) *events.Store {
	h.t.Helper()
	ks, err := openKeyset(h.keysDir(), h.cfg, nil)
	if err != nil {
		h.t.Fatal(err)
	}
	key, err := ks.signer(role, "")
	if err != nil {
		h.t.Fatal(err)
	}
	return events.NewStore(h.client.Conn, h.client.JS, events.SourcePrefix+string(role)+"/harness", events.WithSigningKey(key))
}

// keysDir is where the harness's services find their signing keys.
func (h *harness) keysDir() string { return filepath.Join(h.dir, "keys") }

// The embedded server's listener takes only this user, as --nats-listen requires.
const (
	testNATSUser     = "gridwire-test"
	testNATSPassword = "not-a-secret"
)

// natsURL is the harness server's address with its credentials.
func (h *harness) natsURL() string {
	return "nats://" + testNATSUser + ":" + testNATSPassword + "@" + h.listen
}

func (h *harness) startServer(listen string) {
	h.t.Helper()
	b, err := bus.Open(context.Background(), bus.Config{DataDir: filepath.Join(h.dir, "nats"), Listen: listen,
		User: testNATSUser, Password: testNATSPassword})
	if err != nil {
		h.t.Fatal(err)
	}
	if _, err := events.Provision(context.Background(), b.JS, events.StreamOptions{}); err != nil {
		h.t.Fatal(err)
	}
	h.server = b
	h.listen = b.ClientURL()[len("nats://"):]
}

// restartServer shuts the NATS server down and starts it again on the same port and
// store; every client reconnects by itself.
func (h *harness) restartServer() {
	h.t.Helper()
	h.server.Close()
	h.startServer(h.listen)
}

func (h *harness) start(name string) {
	h.t.Helper()
	b, err := bus.Open(context.Background(), bus.Config{URL: h.natsURL(), Name: "test-" + name})
	if err != nil {
		h.t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if testing.Verbose() {
		log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	// The config's stager section, read as serve reads it (file roots, HTTP policy).
	stg, err := stagerSection(h.cfg)
	if err != nil {
		h.t.Fatal(err)
	}
	// Tests run as root on CI: the built-in cluster's jobs run as root by consent.
	sys := &system{bus: b, cfg: h.cfg, data: h.dir, log: log, host: "test", stager: stg, allowRootJobs: true}
	if h.faults != nil {
		sys.wrapJS, sys.publishFault = h.faults.Wrap, h.faults.PublishFault
	}
	ctx, cancel := context.WithCancel(context.Background())
	g, gctx := errgroup.WithContext(ctx)
	if err := sys.start(gctx, g, []string{name}, nil); err != nil {
		cancel()
		h.t.Fatal(err)
	}
	r := &running{cancel: cancel, done: make(chan error, 1), sys: sys}
	go func() { r.done <- g.Wait() }()
	h.mu.Lock()
	h.services[name] = r
	h.mu.Unlock()
}

// stop ends one service as a shutdown would; the jobs it started keep running.
func (h *harness) stop(name string) {
	h.t.Helper()
	h.mu.Lock()
	r := h.services[name]
	delete(h.services, name)
	h.mu.Unlock()
	if r == nil {
		return
	}
	r.cancel()
	select {
	case err := <-r.done:
		if err != nil && !errors.Is(err, context.Canceled) {
			h.t.Errorf("service %s ended with %v", name, err)
		}
	case <-time.After(20 * time.Second):
		h.t.Fatalf("service %s did not stop", name)
	}
	r.sys.close()
}

func (h *harness) close() {
	for _, name := range allServices {
		h.stop(name)
	}
	h.client.Close()
	h.server.Close()
	// A job still running when the test ends (a failed test, a held or gated job) is
	// ended with it rather than left running on the machine.
	proctest.KillSessionsNaming(h.dir)
}

// submitJSON submits a v3 description and returns its job ID.
func (h *harness) submitJSON(doc any) string {
	h.t.Helper()
	data, err := json.Marshal(doc)
	if err != nil {
		h.t.Fatal(err)
	}
	acc, err := h.submit.Submit(context.Background(), ingest.Submission{File: "test.json", Data: data, Submitter: "test"})
	if err != nil {
		h.t.Fatal(err)
	}
	return acc.Jobs[0]
}

// waitFor polls the job's folded state until ok holds.
func (h *harness) waitFor(id string, what string, ok func(events.State) bool) events.State {
	h.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		st, err := h.store.State(context.Background(), id)
		if err == nil && ok(st) {
			return st
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("job %s: waited 60s for %s; state %s (%v)", id, what, st.Status, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (h *harness) waitEnd(id string) events.State {
	h.t.Helper()
	return h.waitFor(id, "a terminal state", func(st events.State) bool { return st.Status.Terminal() })
}

// succeededOut waits for the job to end, fails the test unless it SUCCEEDED, and
// returns its state and the file out it wrote in its working directory.
func (h *harness) succeededOut(id string) (events.State, []byte) {
	h.t.Helper()
	st := h.waitEnd(id)
	if st.Status != events.StatusSucceeded {
		h.t.Fatalf("task %s %s (%s)", id, st.Status, st.Reason)
	}
	out, _ := os.ReadFile(filepath.Join(st.Incarnation.WorkDir, "out"))
	return st, out
}

func (h *harness) workDir(id string) string { return filepath.Join(h.dir, "jobs", id) }

// history returns the job's events.
func (h *harness) history(id string) []events.Event {
	h.t.Helper()
	hist, err := h.store.Load(context.Background(), id)
	if err != nil {
		h.t.Fatal(err)
	}
	return hist.Events
}

// assertCleanHistory checks that every event is stored once, each life event at most
// once, the chain is unbroken and the log replays to the state it shows.
func (h *harness) assertCleanHistory(id string) {
	h.t.Helper()
	evs := h.history(id)
	seen := map[string]bool{}
	count := map[events.Name]int{}
	for i, e := range evs {
		if seen[e.ID] {
			h.t.Errorf("event %s stored twice", e.ID)
		}
		seen[e.ID] = true
		count[e.Name]++
		if i > 0 && (e.PrevHash != evs[i-1].Hash || e.PrevSeq != evs[i-1].Seq) {
			h.t.Errorf("event %d (%s) does not chain to its predecessor", i, e.Name)
		}
	}
	for _, n := range []events.Name{events.Submitted, events.Incarnated, events.Queued, events.Started,
		events.Exited, events.StagedOut, events.Succeeded, events.Failed, events.Cancelled} {
		if count[n] > 1 {
			h.t.Errorf("job %s has %d %s events", id, count[n], n)
		}
	}
	if _, err := events.Replay(evs); err != nil {
		h.t.Errorf("history does not replay: %v", err)
	}
}

// gated is a job that runs until the test writes its exit code into the file
// "release" in its working directory.
func gated() map[string]any {
	return map[string]any{"version": 3, "executable": "/bin/sh",
		"arguments": []string{"-c", `while [ ! -s release ]; do sleep 0.02; done; exit "$(cat release)"`}}
}

func (h *harness) release(id string, code string) {
	h.t.Helper()
	dir := h.workDir(id)
	if st, err := h.store.State(context.Background(), id); err == nil && st.Incarnation != nil {
		dir = st.Incarnation.WorkDir // on an SSH cluster's work root (a loopback host in tests)
	}
	if err := os.WriteFile(filepath.Join(dir, "release"), []byte(code), 0o644); err != nil {
		h.t.Fatal(err)
	}
}

// request records a cancel, hold or resume request as the control API does, signed
// with the executor's key as ingest's may not.
func (h *harness) request(id string, name events.Name) {
	h.t.Helper()
	if _, err := (executor.ControlAPI{Store: h.roleStore(events.RoleExecutor)}).Request(context.Background(), id, name, events.Note{Reason: "test"}); err != nil {
		h.t.Fatalf("%s: %v", name, err)
	}
}

func (h *harness) started(id string) events.StartedData {
	h.t.Helper()
	for _, e := range h.history(id) {
		if e.Name == events.Started {
			var d events.StartedData
			if err := e.Payload(&d); err != nil {
				h.t.Fatal(err)
			}
			return d
		}
	}
	h.t.Fatalf("job %s has no started event", id)
	return events.StartedData{}
}

func isRunning(st events.State) bool { return st.Status == events.StatusRunning }
