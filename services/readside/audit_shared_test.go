package readside

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gridwire/gridwire/events"
)

// A signing store's single appends that are ready to be signed at the same moment share
// one batch signature (events' group signing). The audit accepts a log written that way
// by every role at once, and a batch one of whose members was refused (another writer
// got there first): the refused event never reaches the log, its batch-mate verifies by
// its path (which holds only the refused event's hash), and the decision made again on
// the newer state carries a signature of its own.
func TestAuditAcceptsSharedSignatures(t *testing.T) {
	b, unsigned := openBus(t)
	ctx := context.Background()
	rk := newRoleKeys(t, b)

	// Sixteen jobs live at once, each step through its role's store.
	ids := make([]string, 16)
	errs := make([]error, len(ids))
	var wg sync.WaitGroup
	for n := range ids {
		ids[n] = events.NewID()
		wg.Go(func() { errs[n] = rk.live(ctx, ids[n], life(ids[n], "c1", n)) })
	}
	wg.Wait()
	for n, err := range errs {
		if err != nil {
			t.Fatalf("job %d: %v", n, err)
		}
	}
	rep, err := Audit(ctx, b.JS, "", rk.ring)
	if err != nil || !rep.OK() || rep.Jobs != len(ids) || rep.Unsigned != 0 {
		t.Fatalf("audit of jobs appended at once: %+v %v", rep, err)
	}

	// The watcher decides exited on jobs a and other at the same moment, signed together;
	// meanwhile another writer appended to a, so a's exited is refused and decided again.
	a, other := events.NewID(), events.NewID()
	for _, id := range []string{a, other} {
		if err := rk.live(ctx, id, life(id, "c1", 0)[:8]); err != nil {
			t.Fatal(err)
		}
	}
	stale, err := unsigned.State(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	if err := rk.live(ctx, a, []step{{Name: events.StatusUnknown, Route: "c1", Payload: events.Note{Reason: "probe failed"}}}); err != nil {
		t.Fatal(err)
	}
	mateState, err := unsigned.State(ctx, other)
	if err != nil {
		t.Fatal(err)
	}
	exited := func(st events.State) events.Event {
		e, _ := events.New(st.JobID, events.Exited, "c1", t0.Add(time.Hour), events.ExitedData{ExitCode: 0})
		e.Source, e.PrevSeq, e.PrevHash = events.SourcePrefix+"watcher/test", st.LastSeq, st.LastHash
		return e
	}
	pair := []events.Event{exited(stale), exited(mateState)}
	rk.keys[events.RoleWatcher].SignAll(pair)
	if _, err := rk.stores[events.RoleWatcher].Append(ctx, stale.LastSeq, stale.LastHash, pair[0]); err == nil {
		t.Fatal("the stale exited was appended")
	}
	mateBody, err := pair[1].Encode()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.JS.Publish(ctx, events.Subject(other, events.Exited, "c1"), mateBody); err != nil {
		t.Fatal(err)
	}
	if err := rk.live(ctx, a, []step{{Name: events.Exited, Route: "c1", Payload: events.ExitedData{ExitCode: 0}}}); err != nil {
		t.Fatal(err)
	}
	rep, err = Audit(ctx, b.JS, "", rk.ring)
	if err != nil || !rep.OK() || rep.Jobs != len(ids)+2 {
		t.Fatalf("audit with a refused batch member: %+v %v", rep, err)
	}
	h, err := unsigned.Load(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	last := h.Events[len(h.Events)-1]
	if last.Name != events.Exited || last.ID == pair[0].ID || strings.Contains(last.Signature, ".") {
		t.Fatalf("job a ends with %s %s signed %q: want the exited decided again, signed alone", last.Name, last.ID, last.Signature)
	}
	if !strings.Contains(pair[1].Signature, ".") {
		t.Fatalf("the batch-mate's signature %q is not a batch's", pair[1].Signature)
	}
	// The batch's signature worn by another event, chained onto the batch-mate, breaks
	// it: a path proves the bytes it was made for only.
	now, err := unsigned.State(ctx, other)
	if err != nil {
		t.Fatal(err)
	}
	forged := exited(now)
	forged.Signer, forged.Signature = pair[1].Signer, pair[1].Signature
	forgedBody, _ := forged.Encode()
	if _, err := b.JS.Publish(ctx, events.Subject(other, events.Exited, "c1"), forgedBody); err != nil {
		t.Fatal(err)
	}
	if rep, err := Audit(ctx, b.JS, "", rk.ring); err != nil || len(rep.Broken) != 1 || rep.Broken[0].Job != other {
		t.Fatalf("audit with a batch signature worn by another event: %+v %v", rep, err)
	} else if !strings.Contains(rep.Broken[0].Problem, "does not hold") {
		t.Fatalf("the forged event is broken for %q, want its signature", rep.Broken[0].Problem)
	}
}

// live appends steps to a job, each through the store of the role that writes it,
// returning the first error (playSigned for a goroutine of its own).
func (rk roleKeys) live(ctx context.Context, id string, steps []step) error {
	for i, s := range steps {
		e, err := events.New(id, s.Name, s.Route, t0.Add(time.Duration(i)*time.Second), s.Payload)
		if err != nil {
			return err
		}
		role := owner[s.Name]
		if s.Name == events.StatusUnknown {
			role = events.RoleWatcher
		}
		if _, err := rk.stores[role].Decide(ctx, id, func(events.State) ([]events.Event, error) {
			return []events.Event{e}, nil
		}); err != nil {
			return err
		}
	}
	return nil
}
