package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/events/eventstest"
	"github.com/gridwire/gridwire/pkg/bus"
	"github.com/gridwire/gridwire/pkg/cluster"
	"github.com/gridwire/gridwire/services/executor"
	"github.com/gridwire/gridwire/services/ingest"
	"github.com/gridwire/gridwire/services/readside"
	"github.com/gridwire/gridwire/services/watcher"
)

// The replay fixtures of events/testdata/replay are recorded here, from real runs: the
// harness's embedded NATS and real services, real fork jobs, and for the histories no
// healthy system writes on its own (a target that cannot be asked, an executor that died
// between START and its record) the same hooks the watcher's and executor's tests use.
//
//	go test ./cmd/gridwire -run TestRecordFixtures -record            # every fixture
//	go test ./cmd/gridwire -run 'TestRecordFixtures/exit-3$' -record  # one
var record = flag.Bool("record", false, "record the replay fixtures into events/testdata/replay/v1")

// fixtureDir is where the recorder writes, from this package's directory.
var fixtureDir = filepath.Join("..", "..", "events", filepath.FromSlash(eventstest.ReplayDir))

// scenario is one recorded history: run drives real services through it and checks it
// ended as described; every job it touched must have ended (or be a parent record).
type scenario struct {
	name  string
	about string
	run   func(r *recorder)
}

// recorder is one scenario's harness and what it needs to capture the stream.
type recorder struct {
	*harness
	t   *testing.T
	dir string // where the fixture is written
}

func TestRecordFixtures(t *testing.T) {
	if !*record {
		t.Skip("records fixtures only with -record (see events/testdata/replay/README.md)")
	}
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) { recordScenario(t, sc, fixtureDir) })
	}
	if err := writeFixtureIndex(); err != nil {
		t.Fatal(err)
	}
}

func recordScenario(t *testing.T, sc scenario, dir string) {
	r := &recorder{t: t, dir: dir}
	sc.run(r)
	if r.harness == nil {
		t.Fatal("the scenario ran no harness")
	}
	r.capture(sc.name)
}

// The recorder keeps working between recordings: a few scenarios (a plain run, the
// watcher hook, an adoption, another system's events) are recorded into a temporary
// directory by every test run, and what they wrote loads and replays to what it says.
func TestRecorderStillRecords(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"exit-3", "status-unknown-known", "adoption-after-executor-crash", "external-events"} {
		i := slices.IndexFunc(scenarios, func(sc scenario) bool { return sc.name == name })
		if i < 0 {
			t.Fatalf("no scenario %s", name)
		}
		t.Run(name, func(t *testing.T) { recordScenario(t, scenarios[i], dir) })
		f, err := eventstest.LoadFixture(dir, name)
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range f.Jobs() {
			st, err := events.Replay(f.History(id))
			if err != nil || st.Status != f.States[id].Status || st.LastHash != f.States[id].LastHash {
				t.Errorf("%s: job %s replays to %s (%v), recorded %s", name, id, st.Status, err, f.States[id].Status)
			}
		}
	}
}

// open starts the scenario's harness with the default config and every service but
// those left out.
func (r *recorder) open(without ...string) *recorder {
	return r.openWith(cluster.Default(), without...)
}

func (r *recorder) openWith(cfg cluster.Config, without ...string) *recorder {
	var names []string
	for _, s := range allServices {
		if !slices.Contains(without, s) {
			names = append(names, s)
		}
	}
	r.harness = newHarnessWith(r.t, cfg, names...)
	return r
}

// capture waits until the stream is still and the projection has folded all of it,
// then writes the fixture: the stored messages, the live fold and the projection rows.
func (r *recorder) capture(name string) {
	ctx := context.Background()
	stored := r.settledStream(ctx)
	states := map[string]events.State{}
	// A store with no cache folds what is stored, exactly as a later reader would.
	fresh := events.NewStore(r.client.Conn, r.client.JS, "test/recorder", events.WithStateCache(0))
	for _, s := range stored {
		id, _, _, err := events.ParseSubject(s.Subject)
		if err != nil {
			r.t.Fatal(err)
		}
		if _, ok := states[id]; ok {
			continue
		}
		st, err := fresh.State(ctx, id)
		if err != nil {
			r.t.Fatalf("folding job %s: %v", id, err)
		}
		if !st.Status.Terminal() && (st.Job == nil || st.Job.Kind != events.KindGroup) {
			r.t.Fatalf("job %s is %s: a fixture records whole lives", id, st.Status)
		}
		states[id] = st
	}
	f := eventstest.Fixture{Name: name, Stored: stored, States: states, Trails: map[string][]string{},
		Rows: r.projectionRows(ctx, stored[len(stored)-1].Seq, states)}
	if err := f.Decode(); err != nil {
		r.t.Fatal(err)
	}
	for _, id := range f.Jobs() {
		trail, err := eventstest.Trail(f.History(id), events.Apply)
		if err != nil {
			r.t.Fatalf("job %s: %v", id, err)
		}
		f.Trails[id] = trail
	}
	if err := eventstest.WriteFixture(r.dir, f); err != nil {
		r.t.Fatal(err)
	}
}

// settledStream reads every stored message once the stream has stopped growing.
func (r *recorder) settledStream(ctx context.Context) []eventstest.Stored {
	stream, err := r.client.JS.Stream(ctx, events.Stream)
	if err != nil {
		r.t.Fatal(err)
	}
	var last uint64
	for still := 0; still < 5; {
		info, err := stream.Info(ctx)
		if err != nil {
			r.t.Fatal(err)
		}
		if info.State.LastSeq == last {
			still++
		} else {
			still, last = 0, info.State.LastSeq
		}
		time.Sleep(100 * time.Millisecond)
	}
	var out []eventstest.Stored
	for seq := uint64(1); seq <= last; seq++ {
		m, err := stream.GetMsg(ctx, seq)
		if err != nil {
			r.t.Fatalf("reading message %d: %v", seq, err)
		}
		out = append(out, eventstest.Stored{Seq: m.Sequence, Subject: m.Subject, Body: m.Data})
	}
	if len(out) == 0 {
		r.t.Fatal("the scenario stored no event")
	}
	return out
}

// projectionRows waits for the live projector to stamp the projection at the stream's
// last sequence and reads every job's row from it.
func (r *recorder) projectionRows(ctx context.Context, last uint64, states map[string]events.State) map[string]events.State {
	kv, err := r.client.JS.KeyValue(ctx, readside.JobsBucket)
	if err != nil {
		r.t.Fatalf("projection bucket: %v", err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		var m readside.Meta
		if e, err := kv.Get(ctx, readside.MetaKey); err == nil && json.Unmarshal(e.Value(), &m) == nil && m.Seq >= last {
			break
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("the projection never reached sequence %d", last)
		}
		time.Sleep(50 * time.Millisecond)
	}
	rows := map[string]events.State{}
	for id := range states {
		e, err := kv.Get(ctx, readside.JobKey(id))
		if err != nil {
			r.t.Fatalf("projection row of %s: %v", id, err)
		}
		var row events.State
		if err := json.Unmarshal(e.Value(), &row); err != nil {
			r.t.Fatal(err)
		}
		rows[id] = row
	}
	return rows
}

// submit hands a description in through ingest, as POST /v1/jobs does, and returns the
// IDs of the jobs it made (the parent record first).
func (r *recorder) submit(file string, data string) []string {
	r.t.Helper()
	acc, err := r.harness.submit.Submit(context.Background(), ingest.Submission{File: file, Data: []byte(data), Submitter: "recorder"})
	if err != nil {
		r.t.Fatalf("submitting %s: %v", file, err)
	}
	return acc.Jobs
}

// v3 submits a v3 JSON description and returns its job's ID.
func (r *recorder) v3(doc map[string]any) string {
	r.t.Helper()
	doc["version"] = 3
	b, err := json.Marshal(doc)
	if err != nil {
		r.t.Fatal(err)
	}
	return r.submit("job.json", string(b))[0]
}

// request asks for a cancel, hold or resume as the control API does.
func (r *recorder) request(id string, name events.Name) {
	r.t.Helper()
	if _, err := (executor.ControlAPI{Store: r.store}).Request(context.Background(), id, name, events.Note{Reason: "recorded " + string(name)}); err != nil {
		r.t.Fatalf("%s of %s: %v", name, id, err)
	}
}

// expect waits for the job to end and checks how.
func (r *recorder) expect(id string, want events.Status, check ...func(events.State) string) events.State {
	r.t.Helper()
	st := r.waitEnd(id)
	if st.Status != want {
		r.t.Fatalf("job %s ended %s (%s), want %s", id, st.Status, st.Reason, want)
	}
	for _, c := range check {
		if msg := c(st); msg != "" {
			r.t.Fatalf("job %s: %s", id, msg)
		}
	}
	return st
}

func exitedWith(code int) func(events.State) string {
	return func(st events.State) string {
		if st.ExitCode == nil || *st.ExitCode != code {
			return fmt.Sprintf("exit code %v, want %d", st.ExitCode, code)
		}
		return ""
	}
}

func reasonHas(s string) func(events.State) string {
	return func(st events.State) string {
		if !strings.Contains(st.Reason, s) {
			return fmt.Sprintf("reason %q, want it to say %q", st.Reason, s)
		}
		return ""
	}
}

func neverStarted(st events.State) string {
	if st.NativeID != "" {
		return "it started (native ID " + st.NativeID + ")"
	}
	return ""
}

func (r *recorder) has(id string, n events.Name, times int) {
	r.t.Helper()
	if got := eventstest.Count(eventstest.Names(r.t, r.store, id), n); got != times {
		r.t.Fatalf("job %s has %d %s events, want %d", id, got, n, times)
	}
}

func (r *recorder) status(id string, s events.Status) events.State {
	r.t.Helper()
	return r.waitFor(id, string(s), func(st events.State) bool { return st.Status == s })
}

// files serves fixed files over HTTP: the first `fail` requests of each path answer
// 503, and paths not in content answer 404.
func (r *recorder) files(fail int, content map[string]string) string {
	var mu sync.Mutex
	calls := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		mu.Lock()
		calls[req.URL.Path]++
		n := calls[req.URL.Path]
		mu.Unlock()
		if n <= fail {
			http.Error(w, "storage busy", http.StatusServiceUnavailable)
			return
		}
		body, ok := content[req.URL.Path]
		if !ok {
			http.NotFound(w, req)
			return
		}
		_, _ = w.Write([]byte(body))
	}))
	r.t.Cleanup(srv.Close)
	return srv.URL
}

// writeFile writes a file under dir and returns its path.
func (r *recorder) writeFile(dir, name, content string) string {
	r.t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		r.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		r.t.Fatal(err)
	}
	return p
}

// outage is a prober that cannot reach its target while down.
type outage struct {
	down  atomic.Bool
	inner watcher.Prober
}

func (o *outage) Probe(ctx context.Context, jobs []watcher.Watched) (map[string]watcher.Observation, error) {
	if o.down.Load() {
		return nil, errors.New("fork: cannot ask the host: recorded outage")
	}
	return o.inner.Probe(ctx, jobs)
}

// watchThrough runs the watcher (in a harness opened without one) observing the local
// cluster through p, until the scenario ends.
func (r *recorder) watchThrough(p watcher.Prober) {
	b, err := bus.Open(context.Background(), bus.Config{URL: r.natsURL(), Name: "test-watcher"})
	if err != nil {
		r.t.Fatal(err)
	}
	store := events.NewStore(b.Conn, b.JS, "gridwire/watcher/test")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- watcher.Run(ctx, watcher.Config{Clusters: r.cfg.Clusters},
			watcher.Deps{JS: b.JS, Conn: b.Conn, Store: store, Probers: map[string]watcher.Prober{"local": p}})
	}()
	r.t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			r.t.Errorf("watcher: %v", err)
		}
		b.Close()
	})
}

// crashedStart runs START for a queued job as an executor would that then died before
// recording it: the process runs, the log knows nothing of it.
func (r *recorder) crashedStart(id string) events.StartedData {
	r.t.Helper()
	st := r.status(id, events.StatusQueued)
	d, err := (&executor.ForkTarget{Cluster: "local"}).Start(context.Background(), st)
	if err != nil {
		r.t.Fatal(err)
	}
	return d
}

// publish posts another system's CloudEvent to the gateway's POST /v1/events.
func (r *recorder) publish(api string, id, job, source string, name events.Name, at time.Time, data any) {
	r.t.Helper()
	body, _ := json.Marshal(map[string]any{"specversion": "1.0", "id": id, "source": source,
		"type": name.Type(), "subject": job, "time": at.Format(time.RFC3339Nano),
		"datacontenttype": "application/json", "data": data})
	resp, err := http.Post(api+"/v1/events", "application/cloudevents+json", bytes.NewReader(body))
	if err != nil {
		r.t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		var out bytes.Buffer
		_, _ = out.ReadFrom(resp.Body)
		r.t.Fatalf("POST /v1/events %s: %s %s", name, resp.Status, out.String())
	}
}

// api serves the routes the named service's process offers (ingest's way in, the
// executor's control requests).
func (r *recorder) api(service string) string {
	r.mu.Lock()
	srv := httptest.NewServer(r.services[service].sys.routes())
	r.mu.Unlock()
	r.t.Cleanup(srv.Close)
	return srv.URL
}

// writeFixtureIndex writes the fixture directory's README: how to record, and what
// each fixture holds.
func writeFixtureIndex() error {
	var b strings.Builder
	b.WriteString(fixtureReadme)
	b.WriteString("\n| fixture | what it records |\n|---|---|\n")
	for _, sc := range scenarios {
		fmt.Fprintf(&b, "| `%s` | %s |\n", sc.name, sc.about)
	}
	return os.WriteFile(filepath.Join(fixtureDir, "..", "README.md"), []byte(b.String()), 0o644)
}

const fixtureReadme = `# Replay fixtures

Recorded job histories: slices of the JOBS stream captured from real runs of gridwire
(embedded NATS, the real services, real fork jobs), each with the state every job folded
to and the job-table row the live projector wrote for it. ` + "`make test`" + ` replays them:

- ` + "`events`" + ` (TestReplayFixtures…) folds every history with ` + "`events.Apply`" + ` and compares it
  with the recorded state, checks every hash chain, checks that the set covers every
  event and every end, and that deliberately wrong folds (the mutants in
  ` + "`replay_fixture_test.go`" + `) are caught;
- ` + "`services/readside`" + ` (TestReplayFixturesProjectToTheirRecordedRows), which owns the
  job-table projection, folds every history into its table and compares each row with
  the recorded one.

## Layout (v1)

` + "`v1/NAME.jsonl`" + ` holds one stored message a line,
` + "`{\"seq\":N,\"subject\":\"jobs.<id>.<event>.<route>\",\"event\":{...}}`" + `, where ` + "`event`" + ` is
the CloudEvent body byte for byte as it was stored (the next event of the job names its
SHA-256). ` + "`v1/NAME.state.json`" + ` maps each job ID to its folded ` + "`events.State`" + `;
` + "`v1/NAME.trail.json`" + ` to the state after each of its events (status, exit code, native
state and flags, one line an event: a fold that goes wrong and right again is still
caught); ` + "`v1/NAME.row.json`" + ` to its projection row. A new layout goes into ` + "`v2/`" + ` beside
this one; the v1 fixtures stay and keep passing.

## When an event's schema changes

Stored events are never rewritten. Bump the name's version (` + "`events.Name.Version`" + `),
register an ` + "`events.Upcaster`" + ` from the old version in ` + "`builtinUpcasters`" + `, record a new
fixture with the new shape, and keep the old fixtures: they must still fold to their
recorded states through the upcaster. (A change inside the canonical ` + "`Job`" + ` that its keys
make recognisable may instead be read when the job is decoded, as
` + "`events/requirements_v1.go`" + ` does for the first requirements schema.)

## Recording

The recorder is a test of ` + "`cmd/gridwire`" + ` behind a flag. From the repository root:

    cd cmd/gridwire && go test -run TestRecordFixtures -record -count=1 .

or one fixture: ` + "`go test -run 'TestRecordFixtures/exit-3$' -record -count=1 .`" + `
Recording changes every ID, time and hash, so re-record only what you mean to change
and read the diff of the ` + "`.state.json`" + ` files. Each scenario checks that its jobs ended
the way it describes before anything is written. This README's table is written by the
recorder from its scenario list. So that the recorder does not rot between recordings,
` + "`TestRecorderStillRecords`" + ` records a few scenarios into a temporary directory on every
` + "`make test`" + `.
`
