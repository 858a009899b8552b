package ingest

import (
	"context"
	"errors"
	"math"
	"runtime"
	"runtime/debug"
	"sync"
	"testing"
	"time"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/events/eventstest"
)

// Many single-job submissions at once: each is answered with its own job, stored once,
// against the real store (whose CreateAll the queue uses).
func TestConcurrentSubmitsEachStoredOnce(t *testing.T) {
	_, st := eventstest.Open(t, "test/ingest")
	svc, err := New(Config{}, Deps{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	const n = 64
	ids := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			acc, err := svc.Submit(t.Context(), Submission{File: "a.json", Data: []byte(`{"version":3,"executable":"/bin/true"}`)})
			if err != nil || len(acc.Jobs) != 1 {
				t.Errorf("submission %d: %+v, %v", i, acc, err)
				return
			}
			ids[i] = acc.Jobs[0]
		})
	}
	wg.Wait()
	seen := map[string]bool{}
	for _, id := range ids {
		if id == "" || seen[id] {
			t.Fatalf("job IDs %q: one missing or given twice", ids)
		}
		seen[id] = true
		h, err := st.Load(t.Context(), id)
		if err != nil || len(h.Events) != 1 || h.Events[0].Name != events.Submitted {
			t.Fatalf("job %s: %+v, %v", id, h, err)
		}
	}
}

// heldStore holds its first CreateAll until released, and refuses the events of jobs it
// is told to refuse.
type heldStore struct {
	memStore
	mu      sync.Mutex
	entered chan struct{}
	release chan struct{}
	batches []int
	refuse  func(events.Event) bool
}

var errRefused = errors.New("refused")

func (h *heldStore) CreateAll(ctx context.Context, evs []events.Event) ([]uint64, []error) {
	h.mu.Lock()
	first := len(h.batches) == 0
	h.batches = append(h.batches, len(evs))
	h.mu.Unlock()
	if first {
		close(h.entered)
		<-h.release
	}
	errs := make([]error, len(evs))
	h.mu.Lock()
	defer h.mu.Unlock()
	for i, e := range evs {
		if h.refuse(e) {
			errs[i] = errRefused
			continue
		}
		_, errs[i] = h.Create(ctx, e)
	}
	return make([]uint64, len(evs)), errs
}

// Submissions arriving while one is being stored queue and are stored together, in
// one CreateAll, once it is done; each is answered with its own outcome: one refused
// event fails its submission alone.
func TestSubmitsArrivingTogetherShareOneCreateAll(t *testing.T) {
	var refuseName string
	store := &heldStore{entered: make(chan struct{}), release: make(chan struct{}),
		refuse: func(e events.Event) bool { return e.Principal == refuseName }}
	refuseName = "odd"
	svc, err := New(Config{}, Deps{Store: store})
	if err != nil {
		t.Fatal(err)
	}
	submit := func(who string) error {
		_, err := svc.Submit(t.Context(), Submission{File: "a.json", Data: []byte(`{"version":3,"executable":"/bin/true"}`), Submitter: who})
		return err
	}
	first := make(chan error, 1)
	go func() { first <- submit("first") }()
	<-store.entered
	const n = 9
	errs := make(chan error, n)
	for i := range n {
		who := "even"
		if i == 4 {
			who = "odd"
		}
		go func() { errs <- submit(who) }()
	}
	for queued := 0; queued < n; runtime.Gosched() {
		queued = svc.creates.q.Waiting()
	}
	close(store.release)
	if err := <-first; err != nil {
		t.Fatalf("the first submission: %v", err)
	}
	refused := 0
	for range n {
		if err := <-errs; errors.Is(err, errRefused) {
			refused++
		} else if err != nil {
			t.Fatal(err)
		}
	}
	if refused != 1 || len(store.created) != n || len(store.batches) != 2 || store.batches[0] != 1 || store.batches[1] != n {
		t.Fatalf("%d refused, %d stored in batches %v; want 1 refused, %d stored in [1 %d]", refused, len(store.created), store.batches, n, n)
	}
}

// panicStore panics in its first CreateAll.
type panicStore struct {
	memStore
	calls int
}

func (p *panicStore) CreateAll(ctx context.Context, evs []events.Event) ([]uint64, []error) {
	if p.calls++; p.calls == 1 {
		panic("store failed")
	}
	errs := make([]error, len(evs))
	for i, e := range evs {
		_, errs[i] = p.Create(ctx, e)
	}
	return make([]uint64, len(evs)), errs
}

// A store that panics (net/http recovers a handler's panic, and the process goes on)
// fails that submission and leaves the queue working for the next.
func TestSubmitQueueSurvivesAPanickingStore(t *testing.T) {
	store := &panicStore{}
	svc, err := New(Config{}, Deps{Store: store})
	if err != nil {
		t.Fatal(err)
	}
	sub := Submission{File: "a.json", Data: []byte(`{"version":3,"executable":"/bin/true"}`)}
	func() {
		defer func() {
			if r := recover(); r == nil {
				t.Error("the store's panic did not reach the submitter")
			}
		}()
		_, _ = svc.Submit(t.Context(), sub)
	}()
	if _, err := svc.Submit(t.Context(), sub); err != nil || len(store.created) != 1 {
		t.Fatalf("after a panic: %v, %d stored", err, len(store.created))
	}
}

// Single submissions stored together relax the collector, and it stays relaxed between
// their batches until gcLingerFor has passed without one; a submission stored alone
// leaves it as it is.
func TestSubmissionsStoredTogetherRelaxTheCollector(t *testing.T) {
	endGCLinger(time.Now().Add(time.Hour)) // an earlier test's linger
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(math.MaxInt64))
	store := &gcStore{}
	svc, err := New(Config{}, Deps{Store: store})
	if err != nil {
		t.Fatal(err)
	}
	p, err := svc.prepare(t.Context(), Submission{File: "a.json", Data: []byte(`{"version":3,"executable":"/bin/true"}`)})
	if err != nil {
		t.Fatal(err)
	}
	one := func() *queuedCreate { return &queuedCreate{event: p.events[0]} }
	svc.creates.store(t.Context(), store, []*queuedCreate{one()})
	if store.percent != 100 {
		t.Fatalf("GOGC %d while one submission alone was stored, want 100", store.percent)
	}
	start := time.Now()
	svc.creates.store(t.Context(), store, []*queuedCreate{one(), one()})
	if store.percent != relaxedGCPercent {
		t.Fatalf("GOGC %d while two were stored together, want %d", store.percent, relaxedGCPercent)
	}
	if endGCLinger(start) {
		t.Fatal("the collector was put back before its linger was up")
	}
	if p := debug.SetGCPercent(relaxedGCPercent); p != relaxedGCPercent || debug.SetMemoryLimit(-1) != relaxedMemoryLimit {
		t.Fatalf("between batches: GOGC %d, limit %d", p, debug.SetMemoryLimit(-1))
	}
	if !endGCLinger(start.Add(time.Minute)) {
		t.Fatal("the collector was not put back once the linger was up")
	}
	if p := debug.SetGCPercent(100); p != 100 || debug.SetMemoryLimit(-1) != math.MaxInt64 {
		t.Fatalf("after the linger: GOGC %d, limit %d", p, debug.SetMemoryLimit(-1))
	}
}
