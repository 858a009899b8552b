package property_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/pkg/bus"
	"github.com/gridwire/gridwire/pkg/httpapi"
	"github.com/gridwire/gridwire/pkg/taskcred"
	"github.com/gridwire/gridwire/services/property"
	"github.com/nats-io/nats.go/jetstream"
)

// env is a real embedded JetStream with the log, the service running, and its API on a
// real HTTP server.
type env struct {
	t     testing.TB
	js    jetstream.JetStream
	store *events.Store
	key   taskcred.Key
	svc   *property.Service
	srv   *httptest.Server
}

func newEnv(t testing.TB) *env {
	t.Helper()
	b, err := bus.Open(context.Background(), bus.Config{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	if _, err := events.Provision(context.Background(), b.JS, events.StreamOptions{}); err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, js: b.JS, store: events.NewStore(b.Conn, b.JS, "test/property")}
	if e.key, err = taskcred.Open(context.Background(), b.JS, 1); err != nil {
		t.Fatal(err)
	}
	e.svc, err = property.New(property.Config{Flush: 20 * time.Millisecond},
		property.Deps{JS: b.JS, Store: e.store, Key: e.key})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = e.svc.Run(ctx); close(done) }()
	mux := http.NewServeMux()
	e.svc.Routes(mux)
	e.srv = httptest.NewServer(mux)
	t.Cleanup(func() { e.srv.Close(); cancel(); <-done })
	return e
}

// task is a DDS task declaration for session.
func task(path, coll string, props ...events.DDSProperty) *events.Job {
	return &events.Job{ID: events.NewID(), Executable: "/bin/true", DDS: &events.DDSContext{TaskPath: path,
		CollectionPath: coll, Properties: props, TaskID: "42"}}
}

func p(name, access, scope string) events.DDSProperty {
	return events.DDSProperty{Name: name, Access: access, Scope: scope}
}

// session submits a topology's parent record and its tasks; it returns the session ID.
func (e *env) session(tasks ...*events.Job) string {
	e.t.Helper()
	id := events.NewID()
	parent := events.Job{ID: id, Kind: events.KindGroup, DDS: &events.DDSContext{Topology: "t"}}
	for _, tk := range tasks {
		parent.Children = append(parent.Children, tk.ID)
		tk.Parent = id
	}
	e.create(id, parent)
	for _, tk := range tasks {
		e.create(tk.ID, *tk)
	}
	return id
}

func (e *env) create(id string, j events.Job) {
	e.t.Helper()
	ev, err := events.New(id, events.Submitted, "", time.Now(), j)
	if err != nil {
		e.t.Fatal(err)
	}
	ev.Source = "test"
	if _, err := e.store.Create(context.Background(), ev); err != nil {
		e.t.Fatal(err)
	}
}

// call makes one request as the task whose credential is token.
func (e *env) call(method, token, path, body string) (int, []byte) {
	e.t.Helper()
	req, _ := http.NewRequest(method, e.srv.URL+path, strings.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func (e *env) put(tk *events.Job, key, value string) (int, []byte) {
	return e.call(http.MethodPut, e.key.Issue(tk.ID), "/v1/tasks/self/properties/"+key, value)
}

func (e *env) get(tk *events.Job, key string) (int, property.Value) {
	e.t.Helper()
	code, b := e.call(http.MethodGet, e.key.Issue(tk.ID), "/v1/tasks/self/properties/"+key, "")
	var v property.Value
	if code == http.StatusOK {
		if err := json.Unmarshal(b, &v); err != nil {
			e.t.Fatal(err)
		}
	}
	return code, v
}

func (e *env) mustPut(tk *events.Job, key, value string) {
	e.t.Helper()
	if code, body := e.put(tk, key, value); code != http.StatusOK {
		e.t.Fatalf("PUT %s: status %d: %s", key, code, body)
	}
}

// watcher is an open watch stream.
type watcher struct {
	resp *http.Response
	vals chan property.Value
}

func (e *env) watch(tk *events.Job, query string) *watcher { return e.watchFrom(tk, query, 0) }

// watchFrom opens a watch that resumes after sequence last (SSE's Last-Event-ID).
func (e *env) watchFrom(tk *events.Job, query string, last uint64) *watcher {
	e.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, e.srv.URL+"/v1/tasks/self/properties?watch=1"+query, nil)
	req.Header.Set("Authorization", "Bearer "+e.key.Issue(tk.ID))
	if last > 0 {
		req.Header.Set("Last-Event-ID", strconv.FormatUint(last, 10))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		e.t.Fatalf("watch: %d %s", resp.StatusCode, b)
	}
	w := &watcher{resp: resp, vals: make(chan property.Value, 64)}
	go func() {
		defer close(w.vals)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				var v property.Value
				if json.Unmarshal([]byte(data), &v) == nil {
					w.vals <- v
				}
			}
		}
	}()
	e.t.Cleanup(func() { resp.Body.Close() })
	return w
}

// next is the next value the watch delivers (the test fails after a minute without one).
func (w *watcher) next(t *testing.T) property.Value {
	t.Helper()
	select {
	case v, ok := <-w.vals:
		if !ok {
			t.Fatal("the watch ended")
		}
		return v
	case <-time.After(time.Minute):
		t.Fatal("no value within a minute")
	}
	return property.Value{}
}

// A writer's value reaches a reader's watch, its GET and its list; the set is a
// property_set event in the session's own history.
func TestWriterReachesReader(t *testing.T) {
	e := newEnv(t)
	writer := task("main/server_0", "", p("peer", "write", ""))
	reader := task("main/client_0", "", p("peer", "read", ""))
	session := e.session(writer, reader)
	w := e.watch(reader, "")
	e.mustPut(writer, "peer", "10.0.0.1:4000")
	v := w.next(t)
	if v.Key != "peer" || v.Value != "10.0.0.1:4000" || v.Writer != writer.ID || v.WriterPath != "main/server_0" || v.Scope != "global" {
		t.Fatalf("watch delivered %+v", v)
	}
	if code, got := e.get(reader, "peer"); code != http.StatusOK || got.Value != "10.0.0.1:4000" {
		t.Fatalf("GET = %d %+v", code, got)
	}
	e.mustPut(writer, "peer", "10.0.0.2:4000")
	if v := w.next(t); v.Value != "10.0.0.2:4000" {
		t.Fatalf("second value %+v", v)
	}
	hist, err := e.store.Load(context.Background(), session)
	if err != nil {
		t.Fatal(err)
	}
	var sets []string
	for _, ev := range hist.Events {
		if ev.Name == events.PropertySet {
			var d events.PropertySetData
			_ = ev.Payload(&d)
			sets = append(sets, d.Key+"="+d.Value+" by "+d.TaskPath)
			if ev.Principal != "task "+writer.ID {
				t.Errorf("principal %q", ev.Principal)
			}
		}
	}
	if strings.Join(sets, ";") != "peer=10.0.0.1:4000 by main/server_0;peer=10.0.0.2:4000 by main/server_0" {
		t.Fatalf("session history holds %q", sets)
	}
	// A watch opened later starts with the current value; one resumed after the last
	// id it saw gets nothing already seen, and then the next value.
	late := e.watch(reader, "&key=peer").next(t)
	if late.Value != "10.0.0.2:4000" {
		t.Fatalf("late watch starts with %+v", late)
	}
	resumed := e.watchFrom(reader, "&key=peer", late.Seq)
	e.mustPut(writer, "peer", "10.0.0.3:4000")
	if v := resumed.next(t); v.Value != "10.0.0.3:4000" {
		t.Fatalf("a watch resumed after seq %d delivered %+v first", late.Seq, v)
	}
}

func TestAccessIsTheDeclaration(t *testing.T) {
	e := newEnv(t)
	rw := task("main/a_0", "", p("peer", "readwrite", ""), p("port", "read", ""), p("log", "write", ""))
	other := task("main/b_0", "", p("peer", "readwrite", ""))
	e.session(rw, other)
	outsider := task("main/x_0", "")
	e.session(outsider)
	cases := []struct {
		name, method, token, key, body string
		status                         int
		code                           string
	}{
		{"write a read-only key", "PUT", e.key.Issue(rw.ID), "port", "1", 403, events.RefusedReadOnly},
		{"write an undeclared key", "PUT", e.key.Issue(rw.ID), "other", "1", 403, events.RefusedUndeclared},
		{"read a write-only key", "GET", e.key.Issue(rw.ID), "log", "", 403, events.RefusedWriteOnly},
		{"value over 256 characters", "PUT", e.key.Issue(rw.ID), "peer", strings.Repeat("x", 257), 400, events.RefusedValue},
		{"a key DDS cannot name", "PUT", e.key.Issue(rw.ID), "a.b", "1", 400, events.RefusedBadName},
		{"no credential", "PUT", "", "peer", "1", 401, "unauthenticated"},
		{"a forged credential", "PUT", "gwt1." + rw.ID + ".AAAA", "peer", "1", 401, "bad_task_credential"},
		{"a task without properties", "PUT", e.key.Issue(outsider.ID), "peer", "1", 403, events.RefusedNotATask},
	}
	for _, c := range cases {
		code, body := e.call(c.method, c.token, "/v1/tasks/self/properties/"+c.key, c.body)
		var api struct{ Error httpapi.Error }
		_ = json.Unmarshal(body, &api)
		if code != c.status || api.Error.Code != c.code {
			t.Errorf("%s: %d %s, want %d %s", c.name, code, body, c.status, c.code)
		}
	}
	// A watch of a key the task may not read is refused up front.
	if code, body := e.call("GET", e.key.Issue(rw.ID), "/v1/tasks/self/properties?watch=1&key=log", ""); code != 403 {
		t.Errorf("watch of a write-only key: %d %s", code, body)
	}
	// Nothing refused reached the log; a readwrite task reads another's write, not its own.
	e.mustPut(other, "peer", "from b")
	e.mustPut(rw, "peer", "from a")
	if code, v := e.get(rw, "peer"); code != 200 || v.Value != "from a" {
		t.Fatalf("the writer reads %d %+v", code, v)
	}
	// An ended task's credential is spent.
	if _, err := e.store.Decide(context.Background(), other.ID, func(st events.State) ([]events.Event, error) {
		ev, err := events.New(other.ID, events.Cancelled, "", time.Now(), events.EndData{Reason: "test"})
		return []events.Event{ev}, err
	}); err != nil {
		t.Fatal(err)
	}
	if code, body := e.put(other, "peer", "late"); code != 403 || !strings.Contains(string(body), "task_ended") {
		t.Fatalf("an ended task wrote: %d %s", code, body)
	}
}

// A collection-scoped value stays in its collection instance; a global one reaches every
// reader.
func TestCollectionScope(t *testing.T) {
	e := newEnv(t)
	w0 := task("main/g/pair_0/w_0", "main/g/pair_0", p("shm", "write", "collection"), p("all", "write", ""))
	r0 := task("main/g/pair_0/r_0", "main/g/pair_0", p("shm", "read", "collection"), p("all", "read", ""))
	r1 := task("main/g/pair_1/r_0", "main/g/pair_1", p("shm", "read", "collection"), p("all", "read", ""))
	loose := task("main/w_0", "", p("shm", "write", "collection"))
	e.session(w0, r0, r1, loose)
	watch1 := e.watch(r1, "")
	e.mustPut(w0, "shm", "/dev/shm/pair0")
	e.mustPut(w0, "all", "everyone")
	if code, v := e.get(r0, "shm"); code != 200 || v.Value != "/dev/shm/pair0" || v.Collection != "main/g/pair_0" {
		t.Fatalf("same instance reads %d %+v", code, v)
	}
	if code, _ := e.get(r1, "shm"); code != http.StatusNotFound {
		t.Fatalf("another instance reads the value: %d", code)
	}
	// r1's watch gets the global value and never the other instance's.
	if v := watch1.next(t); v.Key != "all" {
		t.Fatalf("another instance's watch delivered %+v", v)
	}
	e.mustPut(w0, "all", "again")
	if v := watch1.next(t); v.Key != "all" || v.Value != "again" {
		t.Fatalf("another instance's watch delivered %+v", v)
	}
	if code, body := e.put(loose, "shm", "x"); code != 403 || !strings.Contains(string(body), events.RefusedNoCollection) {
		t.Fatalf("a task outside collections wrote a collection property: %d %s", code, body)
	}
}

// The live view rebuilt from the log equals the live one; a tampered entry shows.
func TestRebuildEqualsLive(t *testing.T) {
	e := newEnv(t)
	w := task("main/g/c_0/w_0", "main/g/c_0", p("a", "write", ""), p("b", "write", "collection"))
	w2 := task("main/g/c_1/w_0", "main/g/c_1", p("a", "write", ""), p("b", "write", "collection"))
	e.session(w, w2)
	for i, v := range []string{"1", "2", "3"} {
		e.mustPut([]*events.Job{w, w2}[i%2], "a", v)
		e.mustPut([]*events.Job{w, w2}[i%2], "b", v)
	}
	ctx := context.Background()
	view, upTo, err := property.Rebuild(ctx, e.js, property.Bucket+"-replay")
	if err != nil {
		t.Fatal(err)
	}
	if len(view) != 3 { // a (global), b in c_0, b in c_1
		t.Fatalf("rebuilt %d entries, want 3: %v", len(view), view)
	}
	var c property.Comparison
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		if c, err = property.Compare(ctx, e.js, property.Bucket, view, upTo); err != nil {
			t.Fatal(err)
		}
		if c.Behind == 0 || time.Now().After(deadline) {
			break
		}
	}
	if len(c.Differences) != 0 || c.Behind != 0 || c.Keys != 3 {
		t.Fatalf("live and rebuilt differ: %+v", c)
	}
	replay, _, err := property.Load(ctx, e.js, property.Bucket+"-replay")
	if err != nil || len(replay) != 3 {
		t.Fatalf("the replay bucket holds %d entries (%v)", len(replay), err)
	}
	kv, err := e.js.KeyValue(ctx, property.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	for k, en := range view {
		en.Value = "tampered"
		b, _ := json.Marshal(en)
		if _, err := kv.Put(ctx, k, b); err != nil {
			t.Fatal(err)
		}
		break
	}
	if c, err = property.Compare(ctx, e.js, property.Bucket, view, upTo); err != nil || len(c.Differences) != 1 {
		t.Fatalf("a tampered entry: %d differences (%v)", len(c.Differences), err)
	}
}
