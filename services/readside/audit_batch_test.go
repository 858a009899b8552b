package readside

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/pkg/bus"
)

// A bulk submission is signed in batches (events.SigningKey.SignAll): the audit verifies
// each of its events by its path to the batch's signed root, and fails one that was
// altered, one the batch does not hold, one of a stranger's batch, and one its batch's
// signer may not write, each in its own job.
func TestAuditChecksBatchSignatures(t *testing.T) {
	b, unsigned := openBus(t)
	ctx := context.Background()
	rk := newRoleKeys(t, b)
	ingest := rk.stores[events.RoleIngest]
	subs := make([]events.Event, 100)
	for i := range subs {
		subs[i] = newSubmitted(t, events.NewID())
	}
	if _, errs := ingest.CreateAll(ctx, subs); errs[0] != nil || errs[99] != nil {
		t.Fatal(errs[0], errs[99])
	}
	// One bulk job goes on through every other role.
	lived := subs[0].JobID
	rk.playSigned(t, lived, life(lived, "c1", 0)[1:])
	rep, err := Audit(ctx, b.JS, "", rk.ring)
	if err != nil || !rep.OK() || rep.Jobs != 100 || rep.Unsigned != 0 || rep.SignedFrom != 1 {
		t.Fatalf("audit of a bulk submission: %+v %v", rep, err)
	}
	stored, err := unsigned.Load(ctx, subs[1].JobID)
	if err != nil || len(stored.Events) != 1 || !strings.Contains(stored.Events[0].Signature, ".") {
		t.Fatalf("a bulk job's submitted event: %+v %v, want a batch signature", stored.Events, err)
	}
	batchSigned := stored.Events[0]

	publish := func(e events.Event) {
		t.Helper()
		body, err := e.Encode()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.JS.Publish(ctx, events.Subject(e.JobID, e.Name, e.Route), body); err != nil {
			t.Fatal(err)
		}
	}
	// A copy of a batch-signed submission under a new job, its command changed.
	altered := batchSigned
	altered.JobID = events.NewID()
	altered.Data = []byte(strings.Replace(string(altered.Data), "/bin/true", "/bin/evil", 1))
	publish(altered)
	// A new job's submission wearing a batch signature from another event.
	notListed := newSubmitted(t, events.NewID())
	notListed.Source = batchSigned.Source
	notListed.Signer, notListed.Signature = batchSigned.Signer, batchSigned.Signature
	publish(notListed)
	// A stranger's batch.
	seed, _ := events.NewSeed()
	stranger, _ := events.NewSigningKey(seed, events.Grant{Role: events.RoleIngest})
	strangers := []events.Event{newSubmitted(t, events.NewID()), newSubmitted(t, events.NewID())}
	for i := range strangers {
		strangers[i].Source = batchSigned.Source
	}
	stranger.SignAll(strangers)
	publish(strangers[0])
	// Ingest's key signs a batch of a new job's submission and a cancel routed to c1,
	// chained onto a bulk job: ingest never routes work to a cluster.
	st, err := unsigned.State(ctx, subs[2].JobID)
	if err != nil {
		t.Fatal(err)
	}
	cancel, _ := events.New(subs[2].JobID, events.CancelRequested, "c1", t0.Add(time.Minute), events.Note{})
	cancel.PrevSeq, cancel.PrevHash = st.LastSeq, st.LastHash
	mixed := []events.Event{newSubmitted(t, events.NewID()), cancel}
	for i := range mixed {
		mixed[i].Source = batchSigned.Source
	}
	rk.keys[events.RoleIngest].SignAll(mixed)
	publish(mixed[0])
	publish(mixed[1])

	rep, err = Audit(ctx, b.JS, "", rk.ring)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{altered.JobID: "does not hold", notListed.JobID: "does not hold",
		strangers[0].JobID: "not a trusted key", subs[2].JobID: "unrouted"}
	if len(rep.Broken) != len(want) {
		t.Fatalf("audit found %d broken histories, want %d: %+v", len(rep.Broken), len(want), rep.Broken)
	}
	for _, br := range rep.Broken {
		if !strings.Contains(br.Problem, want[br.Job]) {
			t.Errorf("job %s: %q, want it to say %q", br.Job, br.Problem, want[br.Job])
		}
	}
	// One job alone, without the rest of its batch, verifies by its own path.
	if one, err := Audit(ctx, b.JS, subs[50].JobID, rk.ring); err != nil || !one.OK() || one.Events != 1 {
		t.Errorf("audit of one bulk job: %+v %v", one, err)
	}
}

func newSubmitted(t testing.TB, id string) events.Event {
	t.Helper()
	e, err := events.New(id, events.Submitted, "", t0, events.Job{ID: id, Executable: "/bin/true", Submitter: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// BenchmarkAudit is `audit verify --all` over 10,000 submitted jobs signed as a bulk
// submission signs them (Batch: one signature a batch of 64), as one submission a
// request does from one caller (Single: one each), or from 32 callers at once (Shared:
// appends signed at the same moment share a signature): decoding, chain, signature and
// fold, per event; sigs/event is the signatures the audit had to verify, per event.
func BenchmarkAuditBatch(b *testing.B)  { benchAudit(b, auditBatch) }
func BenchmarkAuditSingle(b *testing.B) { benchAudit(b, auditSingle) }
func BenchmarkAuditShared(b *testing.B) { benchAudit(b, auditShared) }

// How benchAudit's log was appended.
const (
	auditBatch = iota
	auditSingle
	auditShared
)

func benchAudit(b *testing.B, how int) {
	bs, _ := openBus(b)
	seed, _ := events.NewSeed()
	key, _ := events.NewSigningKey(seed, events.Grant{Role: events.RoleIngest})
	ring := &events.Keyring{}
	if err := ring.Add(key.PublicKey(), key.Grant()); err != nil {
		b.Fatal(err)
	}
	st := events.NewStore(bs.Conn, bs.JS, events.SourcePrefix+"ingest/bench", events.WithSigningKey(key))
	ctx := context.Background()
	evs := make([]events.Event, 10_000)
	for i := range evs {
		id := events.NewID()
		evs[i], _ = events.New(id, events.Submitted, "", t0, events.Job{ID: id, Executable: "/bin/true", Submitter: "bench"})
	}
	switch how {
	case auditBatch:
		for _, err := range errsOf(st.CreateAll(ctx, evs)) {
			if err != nil {
				b.Fatal(err)
			}
		}
	case auditSingle:
		for _, e := range evs {
			if _, err := st.Create(ctx, e); err != nil {
				b.Fatal(err)
			}
		}
	case auditShared:
		createFrom(b, st, evs, 32)
	}
	for b.Loop() {
		rep, err := Audit(ctx, bs.JS, "", ring)
		if err != nil || !rep.OK() || rep.Events != uint64(len(evs)) {
			b.Fatalf("%+v %v", rep, err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(evs)), "ns/event")
	b.ReportMetric(float64(signatures(b, bs))/float64(len(evs)), "sigs/event")
}

// createFrom creates evs from conc goroutines at once.
func createFrom(b *testing.B, st *events.Store, evs []events.Event, conc int) {
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, conc)
	for w := range conc {
		wg.Go(func() {
			for i := next.Add(1) - 1; i < int64(len(evs)) && errs[w] == nil; i = next.Add(1) - 1 {
				_, errs[w] = st.Create(context.Background(), evs[i])
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			b.Fatal(err)
		}
	}
}

// signatures counts the distinct ed25519 signatures (a batch's root once) in the log.
func signatures(b *testing.B, bs *bus.Bus) int {
	reader := events.NewStore(bs.Conn, bs.JS, "bench/reader", events.WithStateCache(0))
	sigs := map[string]bool{}
	for from := uint64(1); ; {
		evs, more, err := reader.ReadRange(context.Background(), from, 1024)
		if err != nil {
			b.Fatal(err)
		}
		for _, e := range evs {
			sigs[strings.SplitN(e.Signature, ".", 2)[0]] = true
			from = e.Seq + 1
		}
		if !more || len(evs) == 0 {
			return len(sigs)
		}
	}
}

func errsOf(_ []uint64, errs []error) []error { return errs }
