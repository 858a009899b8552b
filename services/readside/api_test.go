package readside

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/pkg/bus"
)

// apiServer runs the read side over a fresh embedded server, serving HTTP on a
// loopback listener behind the given middleware.
func apiServer(t *testing.T, wrap func(http.Handler) http.Handler) (*bus.Bus, *events.Store, *testServer) {
	t.Helper()
	b, st := openBus(t)
	return b, st, serve(t, b, st, Config{FlushEvery: 10 * time.Millisecond}, wrap)
}

// serve runs the read side with cfg until the test ends, serving HTTP on a loopback
// listener behind wrap.
func serve(tb testing.TB, b *bus.Bus, st *events.Store, cfg Config, wrap func(http.Handler) http.Handler) *testServer {
	tb.Helper()
	ln := &cutListener{Listener: listenLoopback(tb)}
	stop := start(b, st, cfg, HTTP{Listener: ln, Wrap: wrap})
	tb.Cleanup(func() {
		ln.cut()
		if err := stop(); err != nil {
			tb.Errorf("stopping: %v", err)
		}
	})
	return &testServer{URL: "http://" + ln.Addr().String(), ln: ln}
}

// start runs the read side until the returned function stops it and says how Run ended.
func start(b *bus.Bus, st *events.Store, cfg Config, h HTTP) func() error {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg, Deps{JS: b.JS, Store: st, Logger: nopLog(), HTTP: h}) }()
	return func() error {
		cancel()
		return <-done
	}
}

// testServer is where a test's read side serves.
type testServer struct {
	URL string
	ln  *cutListener
}

// CloseClientConnections cuts every connection the server has accepted.
func (s *testServer) CloseClientConnections() { s.ln.cut() }

// cutListener remembers the connections it accepts, so a test can cut them.
type cutListener struct {
	net.Listener
	mu    sync.Mutex
	conns []net.Conn
}

func (l *cutListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.mu.Lock()
		l.conns = append(l.conns, c)
		l.mu.Unlock()
	}
	return c, err
}

func (l *cutListener) cut() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range l.conns {
		c.Close()
	}
	l.conns = nil
}

func listenLoopback(tb testing.TB) net.Listener {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	return ln
}

func getJSON(t *testing.T, url string, out any) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if out != nil && resp.StatusCode < 300 {
		if err := json.Unmarshal(body, out); err != nil {
			t.Fatalf("%s: %v: %s", url, err, body)
		}
	}
	return resp.StatusCode
}

// as_of answers the state the job had at each moment of its life.
func TestJobAsOf(t *testing.T) {
	_, st, srv := apiServer(t, nil)
	id := events.NewID()
	play(t, st, id, t0, life(id, "c1", 1)) // one event a second from t0; exit code 1
	cases := []struct {
		at   time.Time
		want events.Status
		n    int
	}{
		{t0, events.StatusSubmitted, 1},
		{t0.Add(1500 * time.Millisecond), events.StatusIncarnated, 2},
		{t0.Add(4 * time.Second), events.StatusStagingIn, 5},
		{t0.Add(6 * time.Second), events.StatusRunning, 7},
		{t0.Add(8 * time.Second), events.StatusStagingOut, 9},
		{t0.Add(time.Hour), events.StatusFailed, 11},
	}
	for _, c := range cases {
		var v JobView
		u := srv.URL + "/v1/jobs/" + id + "?as_of=" + url.QueryEscape(c.at.Format(time.RFC3339Nano))
		if code := getJSON(t, u, &v); code != 200 || v.Status != c.want || v.Events != c.n {
			t.Errorf("as_of %s: %d %s with %d events, want %s with %d", c.at, code, v.Status, v.Events, c.want, c.n)
		}
	}
	if code := getJSON(t, srv.URL+"/v1/jobs/"+id+"?as_of="+url.QueryEscape(t0.Add(-time.Second).Format(time.RFC3339)), nil); code != 404 {
		t.Errorf("before submission: %d, want 404", code)
	}
	if code := getJSON(t, srv.URL+"/v1/jobs/"+id+"?as_of=yesterday", nil); code != 400 {
		t.Errorf("bad as_of: %d, want 400", code)
	}
	var now JobView
	getJSON(t, srv.URL+"/v1/jobs/"+id, &now)
	if now.Status != events.StatusFailed || now.ExitCode == nil || *now.ExitCode != 1 {
		t.Errorf("current state %+v", now)
	}
}

// GET /v1/jobs serves the projection with filters and paging.
func TestListFromProjection(t *testing.T) {
	_, st, srv := apiServer(t, nil)
	var ids []string
	for n := 0; n < 6; n++ {
		id := events.NewID()
		ids = append(ids, id)
		steps := life(id, []string{"c1", "c2"}[n%2], n)
		play(t, st, id, t0.Add(time.Duration(n)*time.Minute), steps[:len(steps)-n%2])
	}
	eventually(t, "the mirror to hold every job", func() bool {
		var all Page
		getJSON(t, srv.URL+"/v1/jobs?limit=1000", &all)
		return len(all.Jobs) == 6 && all.Seq >= 6*11-3
	})
	// The table is in job ID order; IDs made in the same millisecond need not sort in
	// the order they were made.
	sorted := func(ids ...string) []string { return slices.Sorted(slices.Values(ids)) }
	c2 := sorted(ids[1], ids[3], ids[5])
	var p Page
	getJSON(t, srv.URL+"/v1/jobs?cluster=c2&limit=2", &p)
	if len(p.Jobs) != 2 || p.Jobs[0].ID != c2[0] || p.Jobs[1].ID != c2[1] || p.Next != c2[1] {
		t.Fatalf("page 1: %+v", p)
	}
	next := p.Next
	p = Page{}
	getJSON(t, srv.URL+"/v1/jobs?cluster=c2&limit=2&after="+next, &p)
	if len(p.Jobs) != 1 || p.Jobs[0].ID != c2[2] || p.Next != "" {
		t.Fatalf("page 2: %+v", p)
	}
	getJSON(t, srv.URL+"/v1/jobs?state=staging_out", &p)
	if len(p.Jobs) != 3 {
		t.Fatalf("STAGING_OUT: %d jobs, want 3", len(p.Jobs))
	}
	getJSON(t, srv.URL+"/v1/jobs?submitter=user0&since="+url.QueryEscape(t0.Add(time.Minute).Format(time.RFC3339)), &p)
	if user0 := sorted(ids[2], ids[4]); len(p.Jobs) != 2 || p.Jobs[0].ID != user0[0] || p.Jobs[1].ID != user0[1] {
		t.Fatalf("submitter user0 since +1m: %+v", p)
	}
	for _, bad := range []string{"state=DONE", "limit=0", "since=x", "order=up"} {
		if code := getJSON(t, srv.URL+"/v1/jobs?"+bad, nil); code != 400 {
			t.Errorf("%s: %d, want 400", bad, code)
		}
	}
	var refused struct{ Error struct{ Detail string } }
	resp, err := http.Get(srv.URL + "/v1/jobs?state=running,DONE")
	if err != nil {
		t.Fatal(err)
	}
	_ = json.NewDecoder(resp.Body).Decode(&refused)
	resp.Body.Close()
	if want := `state: "DONE" is not a job state (one of SUBMITTED, INCARNATED, STAGING_IN, QUEUED, RUNNING, HELD, STAGING_OUT, SUCCEEDED, FAILED, CANCELLED)`; refused.Error.Detail != want {
		t.Errorf("an unknown state is refused with %q, want %q", refused.Error.Detail, want)
	}
}

// sseClient reads an SSE stream, remembering the last id, until it has n events or
// the connection is cut.
func readSSE(t *testing.T, resp *http.Response, n int) (ids []uint64, names []string) {
	t.Helper()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "" && len(ids) == n:
			return ids, names
		case strings.HasPrefix(line, "id: "):
			seq, err := strconv.ParseUint(line[4:], 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, seq)
		case strings.HasPrefix(line, "event: "):
			names = append(names, line[7:])
		}
	}
	return ids, names
}

// A client that is cut off mid-stream and reconnects with Last-Event-ID receives every
// event exactly once, in order, including those appended while it was away.
func TestSSEResumesWithoutGapOrDuplicate(t *testing.T) {
	_, st, srv := apiServer(t, nil)
	first, second := events.NewID(), events.NewID()
	play(t, st, first, t0, life(first, "c1", 0)) // 11 events, seq 1..11
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/v1/events?after=0", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := readSSE(t, resp, 7)
	// The server cuts every connection: a disconnect the client did not choose.
	srv.CloseClientConnections()
	resp.Body.Close()
	play(t, st, second, t0, life(second, "c2", 1)) // appended while disconnected: seq 12..22
	req, _ = http.NewRequest(http.MethodGet, srv.URL+"/v1/events", nil)
	req.Header.Set("Last-Event-ID", fmt.Sprint(got[len(got)-1]))
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	more, _ := readSSE(t, resp, 22-len(got))
	got = append(got, more...)
	want := make([]uint64, 22)
	for i := range want {
		want[i] = uint64(i + 1)
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("events across the disconnect (-want +got):\n%s", d)
	}
}

// ?job=ID streams one job's events from its start.
func TestSSEOneJob(t *testing.T) {
	_, st, srv := apiServer(t, nil)
	a, b := events.NewID(), events.NewID()
	play(t, st, a, t0, life(a, "c1", 0)[:3])
	play(t, st, b, t0, life(b, "c1", 0)[:2])
	resp, err := http.Get(srv.URL + "/v1/events?job=" + b)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	ids, names := readSSE(t, resp, 2)
	if d := cmp.Diff([]uint64{4, 5}, ids); d != "" || names[0] != "submitted" || names[1] != "incarnated" {
		t.Fatalf("job stream: %v %v", ids, names)
	}
	if code := getJSON(t, srv.URL+"/v1/events?after=x", nil); code != 400 {
		t.Fatalf("bad Last-Event-ID: %d, want 400", code)
	}
}

// A stream that ends leaves no consumer behind on the server: nats.go leaves an ordered
// consumer's server side for five minutes, and the server refuses a stream more than
// 1,000 consumers by default, so `submit --wait` of 2,000 jobs (a stream each) failed
// part way with "maximum consumers limit reached".
func TestSSEStreamEndedLeavesNoConsumer(t *testing.T) {
	b, st, srv := apiServer(t, nil)
	ctx := context.Background()
	id := events.NewID()
	play(t, st, id, t0, life(id, "c1", 0)[:2])
	stream, err := b.JS.Stream(ctx, events.Stream)
	if err != nil {
		t.Fatal(err)
	}
	consumers := func() int { // of this job's events (the API has others of its own)
		t.Helper()
		n, l := 0, stream.ListConsumers(ctx)
		for ci := range l.Info() {
			if ci.Config.FilterSubject == events.JobFilter(id) || slices.Contains(ci.Config.FilterSubjects, events.JobFilter(id)) {
				n++
			}
		}
		if err := l.Err(); err != nil {
			t.Fatal(err)
		}
		return n
	}
	for range 3 {
		rctx, cancel := context.WithCancel(ctx)
		req, _ := http.NewRequestWithContext(rctx, http.MethodGet, srv.URL+"/v1/events?job="+id, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if ids, _ := readSSE(t, resp, 2); len(ids) != 2 {
			t.Fatalf("the job's stream gave %d events, want 2", len(ids))
		}
		if n := consumers(); n != 1 {
			t.Fatalf("%d consumers of the job's events while its stream is open, want 1", n)
		}
		cancel()
		resp.Body.Close()
		eventually(t, "the ended stream's consumer to be deleted", func() bool { return consumers() == 0 })
	}
}

// An event whose data is not JSON (written around the store) is streamed without its
// data; the stream goes on past it.
func TestSSEGoesOnPastBadData(t *testing.T) {
	b, st, srv := apiServer(t, nil)
	id := events.NewID()
	play(t, st, id, t0, life(id, "c1", 0)[:2])
	bad, _ := events.New(id, events.HoldRequested, "", t0, events.Note{})
	bad.Source = "x/y"
	body, _ := bad.Encode()
	// Encode writes the data {} as a JSON value; a body in the older spelling, data in
	// base64, can carry bytes that are not JSON.
	forged := strings.Replace(string(body), `"data":{}`, `"data_base64":"bm90IGpzb24="`, 1)
	if forged == string(body) {
		t.Fatalf("the body has no data to replace: %s", body)
	}
	body = []byte(forged)
	if _, err := b.JS.Publish(context.Background(), events.Subject(id, events.HoldRequested, ""), body); err != nil {
		t.Fatal(err)
	}
	play(t, st, id, t0, life(id, "c1", 0)[2:3])
	resp, err := http.Get(srv.URL + "/v1/events?after=0")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	ids, names := readSSE(t, resp, 4)
	if d := cmp.Diff([]uint64{1, 2, 3, 4}, ids); d != "" || names[2] != "hold_requested" || names[3] != "staging_in" {
		t.Fatalf("stream: %v %v", ids, names)
	}
}

// A history with an event the fold refuses (published around the store) still shows:
// the state folded up to it, naming it, and every stored event.
func TestJobWithRefusedEvent(t *testing.T) {
	b, st, srv := apiServer(t, nil)
	id := events.NewID()
	play(t, st, id, t0, life(id, "c1", 0)[:3])
	again, _ := events.New(id, events.Submitted, "", t0, events.Job{ID: id})
	again.Source = "x/y"
	body, _ := again.Encode()
	ack, err := b.JS.Publish(context.Background(), events.Subject(id, events.Submitted, ""), body)
	if err != nil {
		t.Fatal(err)
	}
	var v JobView
	if code := getJSON(t, srv.URL+"/v1/jobs/"+id, &v); code != 200 || v.Status != events.StatusStagingIn ||
		!strings.Contains(v.Refused, fmt.Sprintf("seq %d (submitted", ack.Sequence)) {
		t.Fatalf("job view %d %+v", code, v)
	}
	var evs []events.Event
	if code := getJSON(t, srv.URL+"/v1/jobs/"+id+"/events", &evs); code != 200 || len(evs) != 4 {
		t.Fatalf("history %d: %d events, want 4", code, len(evs))
	}
}
