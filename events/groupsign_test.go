package events_test

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/events/eventstest"
	"github.com/gridwire/gridwire/pkg/bus"
)

// rootOf is the root signature part of a batch signature (a plain signature whole).
func rootOf(sig string) string { return strings.SplitN(sig, ".", 2)[0] }

// countOf is the number of events a batch signature covers (1: a plain signature).
func countOf(t testing.TB, sig string) string {
	t.Helper()
	parts := strings.Split(sig, ".")
	if len(parts) == 1 {
		return "1"
	}
	if len(parts) != 4 {
		t.Fatalf("signature %q has %d parts", sig, len(parts))
	}
	return parts[2]
}

// doneOf waits for wg and is closed when it is done.
func doneOf(wg *sync.WaitGroup) <-chan struct{} {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	return done
}

// An event signed while nobody else signs gets Sign's own signature, at once: the same
// bytes Sign writes (ed25519 is deterministic), no batch.
func TestLoneEventIsSignedAlone(t *testing.T) {
	k := signingKey(t, events.Grant{Role: events.RoleIngest})
	e := batch(t, 1)[0]
	alone := e
	k.Sign(&alone)
	events.SignShared(k, &e)
	if e.Signature != alone.Signature || e.Signer != k.PublicKey() {
		t.Fatalf("signed alone: %q, want Sign's %q", e.Signature, alone.Signature)
	}
}

// Events that come to be signed while a signature is being made queue and are then
// signed together, up to 64 a signature; each verifies alone.
func TestQueuedEventsShareOneSignature(t *testing.T) {
	k := signingKey(t, events.Grant{Role: events.RoleIngest})
	ring := ringOf(t, k)
	evs := batch(t, 70)
	release := events.HoldSigning(k)
	var wg sync.WaitGroup
	for i := range evs {
		wg.Go(func() { events.SignShared(k, &evs[i]) })
	}
	release(len(evs), doneOf(&wg))
	wg.Wait()
	counts := map[string]string{}
	for i, e := range evs {
		if _, err := ring.Verify(encode(t, e), "", events.State{}); err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		counts[rootOf(e.Signature)] = countOf(t, e.Signature)
	}
	var got []string
	for _, c := range counts {
		got = append(got, c)
	}
	if len(got) != 2 || !(got[0] == "64" && got[1] == "6" || got[0] == "6" && got[1] == "64") {
		t.Fatalf("70 queued events under signatures of %v events, want one of 64 and one of 6", got)
	}
}

// storedBodies returns each job's stored bodies in order with the state before each,
// after checking that every one verifies alone against ring.
func storedBodies(t *testing.T, b *bus.Bus, ring *events.Keyring, jobIDs ...string) map[string][]events.Event {
	t.Helper()
	ctx := context.Background()
	reader := events.NewStore(b.Conn, b.JS, "test/reader", events.WithStateCache(0))
	stream, err := b.JS.Stream(ctx, events.Stream)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]events.Event{}
	for _, id := range jobIDs {
		h, err := reader.Load(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		verifyAsStored(t, stream, ring, h.Events)
		out[id] = h.Events
	}
	return out
}

// A signing store's appends that are ready to be signed at the same moment, creates
// and decisions on different jobs alike, share one signature, and each stored event
// verifies alone.
func TestConcurrentAppendsShareOneSignature(t *testing.T) {
	b, _ := eventstest.Open(t, "test/unsigned")
	k := signingKey(t, events.Grant{Role: events.RoleIngest})
	st := events.NewStore(b.Conn, b.JS, "gridwire/ingest/test", events.WithSigningKey(k))
	ctx := context.Background()
	old := batch(t, 2)
	for _, e := range old {
		if _, err := st.Create(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	fresh := batch(t, 3)
	release := events.HoldSigning(k)
	var wg sync.WaitGroup
	errs := make([]error, 5)
	for i, e := range fresh {
		wg.Go(func() { _, errs[i] = st.Create(ctx, e) })
	}
	for i, e := range old {
		wg.Go(func() {
			_, errs[3+i] = st.Decide(ctx, e.JobID, func(events.State) ([]events.Event, error) {
				hold, err := events.New(e.JobID, events.HoldRequested, "", t0, events.Note{Reason: "test"})
				return []events.Event{hold}, err
			})
		})
	}
	release(5, doneOf(&wg))
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
	}
	ids := []string{fresh[0].JobID, fresh[1].JobID, fresh[2].JobID, old[0].JobID, old[1].JobID}
	stored := storedBodies(t, b, ringOf(t, k), ids...)
	roots := map[string]bool{}
	for _, id := range ids {
		last := stored[id][len(stored[id])-1]
		roots[rootOf(last.Signature)] = true
		if c := countOf(t, last.Signature); c != "5" {
			t.Errorf("job %s: %s signed in a batch of %s, want the 5 appends together", id, last.Name, c)
		}
	}
	if len(roots) != 1 {
		t.Errorf("5 appends signed at the same moment carry %d root signatures, want 1", len(roots))
	}
	for _, e := range old {
		if first := stored[e.JobID][0]; strings.Contains(first.Signature, ".") {
			t.Errorf("a lone create got a batch signature %q", first.Signature)
		}
	}
}

// A batch member whose append is then refused (another writer got there first) never
// reaches the log: the decision is made again on the newer state and sealed anew, with a
// signature of its own, and every stored event verifies alone, the refused member's
// batch-mate included (its path holds only the refused event's hash).
func TestRefusedMemberOfASharedSignature(t *testing.T) {
	b, _ := eventstest.Open(t, "test/unsigned")
	k := signingKey(t, events.Grant{Role: events.RoleIngest})
	st := events.NewStore(b.Conn, b.JS, "gridwire/ingest/test", events.WithSigningKey(k), events.WithStateCache(0))
	ctx := context.Background()
	jobs := batch(t, 2)
	for _, e := range jobs {
		if _, err := st.Create(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	a, other := jobs[0].JobID, jobs[1].JobID
	stale, err := st.State(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	hold := func(id string) events.Decision {
		return func(events.State) ([]events.Event, error) {
			e, err := events.New(id, events.HoldRequested, "", t0, events.Note{Reason: "test"})
			return []events.Event{e}, err
		}
	}
	// Another writer appends to job a after the state above was read.
	if _, err := st.Decide(ctx, a, hold(a)); err != nil {
		t.Fatal(err)
	}
	var decided atomic.Int32
	var firstID string
	cancel := func(s events.State) ([]events.Event, error) {
		e, err := events.New(a, events.CancelRequested, "", t0, events.Note{Reason: "test"})
		if decided.Add(1) == 1 {
			firstID = e.ID
		}
		return []events.Event{e}, err
	}
	release := events.HoldSigning(k)
	var wg sync.WaitGroup
	var errA, errOther error
	wg.Go(func() { _, errA = st.DecideFrom(ctx, stale, cancel) })
	wg.Go(func() { _, errOther = st.Decide(ctx, other, hold(other)) })
	release(2, doneOf(&wg))
	wg.Wait()
	if errA != nil || errOther != nil {
		t.Fatal(errA, errOther)
	}
	if decided.Load() != 2 {
		t.Fatalf("job a decided %d times, want twice (the stale decision conflicted)", decided.Load())
	}
	stored := storedBodies(t, b, ringOf(t, k), a, other)
	mate := stored[other][1]
	if countOf(t, mate.Signature) != "2" {
		t.Fatalf("the batch-mate's signature covers %s events, want 2 (the refused one too)", countOf(t, mate.Signature))
	}
	ha := stored[a]
	if len(ha) != 3 || ha[2].Name != events.CancelRequested || ha[2].PrevSeq != ha[1].Seq {
		t.Fatalf("job a: %v, want submitted, hold, then the cancel decided again on the hold", ha)
	}
	if ha[2].ID == firstID {
		t.Fatalf("the refused decision's event %s was stored", firstID)
	}
	if rootOf(ha[2].Signature) == rootOf(mate.Signature) {
		t.Fatalf("the decision made again carries the refused batch's root signature")
	}
}

// Under real contention (two writers a job, each decision racing the other's, and new
// jobs created meanwhile) every stored event verifies alone, however the signatures
// were shared.
func TestSharedSigningUnderContention(t *testing.T) {
	b, _ := eventstest.Open(t, "test/unsigned")
	k := signingKey(t, events.Grant{Role: events.RoleIngest})
	st := events.NewStore(b.Conn, b.JS, "gridwire/ingest/test", events.WithSigningKey(k))
	ctx := context.Background()
	jobs := batch(t, 8)
	for _, e := range jobs {
		if _, err := st.Create(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	fresh := batch(t, 32)
	var wg sync.WaitGroup
	errs := make(chan error, 2*len(jobs)+len(fresh))
	for w := range 2 * len(jobs) {
		id := jobs[w%len(jobs)].JobID
		wg.Go(func() {
			for range 10 {
				if _, err := st.Decide(ctx, id, func(events.State) ([]events.Event, error) {
					e, err := events.New(id, events.HoldRequested, "", t0, events.Note{Reason: "test"})
					return []events.Event{e}, err
				}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	for _, e := range fresh {
		wg.Go(func() {
			if _, err := st.Create(ctx, e); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	var ids []string
	for _, e := range append(jobs, fresh...) {
		ids = append(ids, e.JobID)
	}
	stored := storedBodies(t, b, ringOf(t, k), ids...)
	for _, e := range jobs {
		if n := len(stored[e.JobID]); n != 21 {
			t.Errorf("job %s has %d events, want its submission and 20 holds", e.JobID, n)
		}
	}
}

// BenchmarkSignShared is what a signing store's single append spends on its signature:
// from one caller (Serial: each signs alone, BenchmarkSign plus the group's bookkeeping)
// and from 32 at once (Parallel: those that arrive while a signature is made share the
// next). sigs/event is the ed25519 signatures made per event.
func BenchmarkSignShared(b *testing.B) {
	for _, conc := range []int{1, 32} {
		b.Run(concName(conc), func(b *testing.B) {
			k := signingKey(b, events.Grant{Role: events.RoleExecutor})
			var mu sync.Mutex
			roots := map[string]bool{}
			runConcurrently(b, conc, func(int) error {
				e, _ := events.New(events.NewID(), events.Started, "local", t0, events.StartedData{NativeID: "12345"})
				e.Source, e.PrevSeq, e.PrevHash = "gridwire/executor/host-1", 1234, strings.Repeat("a", 64)
				events.SignShared(k, &e)
				mu.Lock()
				roots[rootOf(e.Signature)] = true
				mu.Unlock()
				return nil
			})
			b.ReportMetric(float64(len(roots))/float64(b.N), "sigs/event")
		})
	}
}
