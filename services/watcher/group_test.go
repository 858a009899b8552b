package watcher

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gridwire/gridwire/events"
)

// pausingStore is the event store, except that the armed read of one job waits, once,
// until the test lets it go: a worker that read part of a group and was descheduled.
type pausingStore struct {
	*events.Store
	job     string
	once    sync.Once
	reached chan struct{}
	resume  chan struct{}
}

func (p *pausingStore) StateFresh(ctx context.Context, id string) (events.State, error) {
	st, err := p.Store.StateFresh(ctx, id)
	if id == p.job {
		p.once.Do(func() {
			close(p.reached)
			<-p.resume
		})
	}
	return st, err
}

// groupOfTwo opens a bus holding a parent record of two children, a and b (not yet
// submitted), and gives the watcher's dependencies on it.
func groupOfTwo(t *testing.T) (st *events.Store, deps Deps, parent, a, b string) {
	_, st = openBus(t)
	parent, a, b = events.NewID(), events.NewID(), events.NewID()
	play(t, st, parent, t0, []step{{Name: events.Submitted, Route: events.RouteGroup,
		Payload: events.Job{ID: parent, Name: "group", Kind: events.KindGroup, Children: []string{a, b}}}})
	deps = Deps{Store: st, Logger: nopLog(), Now: func() time.Time { return t0.Add(time.Minute) }}
	return st, deps, parent, a, b
}

// A decision on a group whose children were read before another decision on the same
// parent landed must not undo that decision. With eight workers deciding groups, one
// that had read both children RUNNING appended RUNNING after another had read them HELD
// and appended HELD: the parent stayed RUNNING over two held children (seen as
// TestHoldAndResumeOnParent waiting 60 s for HELD under load).
func TestGroupDecisionAfterAnotherDoesNotUndoIt(t *testing.T) {
	st, deps, parent, a, b := groupOfTwo(t)
	ctx := context.Background()
	for n, id := range []string{a, b} {
		steps := life(id, "hpc1", n)[:8] // submitted ... started, RUNNING
		steps[0].Payload = events.Job{ID: id, Name: "child", Executable: "/bin/true", Parent: parent}
		play(t, st, id, t0, steps)
	}
	status := func() events.Status {
		t.Helper()
		s, err := st.State(ctx, parent)
		if err != nil {
			t.Fatal(err)
		}
		return s.Status
	}
	if err := decideGroup(ctx, deps, parent, events.State{}); err != nil {
		t.Fatal(err)
	}
	if got := status(); got != events.StatusRunning {
		t.Fatalf("parent %s with both children running, want RUNNING", got)
	}
	knownA, err := st.State(ctx, a)
	if err != nil {
		t.Fatal(err)
	}

	// A worker handling a's last event reads the group and stops after reading a.
	slow := &pausingStore{Store: st, job: a, reached: make(chan struct{}), resume: make(chan struct{})}
	slowDeps := deps
	slowDeps.Store = slow
	done := make(chan error, 1)
	go func() { done <- decideGroup(ctx, slowDeps, parent, knownA) }()
	select {
	case <-slow.reached:
	case err := <-done:
		t.Fatalf("the decision ended (%v) without reading child a", err)
	case <-time.After(30 * time.Second):
		t.Fatal("the decision never read child a")
	}

	// Meanwhile both children are held, and another worker moves the parent to HELD.
	for _, id := range []string{a, b} {
		play(t, st, id, t0.Add(time.Minute), []step{{Name: events.Held, Route: "hpc1"}})
	}
	if err := decideGroup(ctx, deps, parent, events.State{}); err != nil {
		t.Fatal(err)
	}
	if got := status(); got != events.StatusHeld {
		t.Fatalf("parent %s with both children held, want HELD", got)
	}

	close(slow.resume)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the first decision never finished")
	}
	if got := status(); got != events.StatusHeld {
		t.Fatalf("parent %s after the slow decision, want HELD: it was decided on children read before the parent held", got)
	}
}

// A decision made on a child read just before it moved must not stick after the
// handler of that move found nothing to do. Here a is held while b, held before, is
// read held by a's handler just before it resumes; b's handler then finds the parent
// RUNNING as it should be and appends nothing, and a's handler appends HELD
// afterwards, its condition on the parent still true. Without deciding again after its
// own append, the parent stays HELD over a running child.
func TestGroupDecisionOnAChildReadBeforeItMovedDoesNotStick(t *testing.T) {
	st, deps, parent, a, b := groupOfTwo(t)
	ctx := context.Background()
	for n, id := range []string{a, b} {
		steps := life(id, "hpc1", n)[:8] // submitted ... started, RUNNING
		steps[0].Payload = events.Job{ID: id, Name: "child", Executable: "/bin/true", Parent: parent}
		play(t, st, id, t0, steps)
	}
	play(t, st, b, t0.Add(time.Minute), []step{{Name: events.Held, Route: "hpc1"}})
	status := func() events.Status {
		t.Helper()
		s, err := st.State(ctx, parent)
		if err != nil {
			t.Fatal(err)
		}
		return s.Status
	}
	if err := decideGroup(ctx, deps, parent, events.State{}); err != nil {
		t.Fatal(err)
	}
	if got := status(); got != events.StatusRunning {
		t.Fatalf("parent %s with a running and b held, want RUNNING", got)
	}

	// a is held; its handler reads a, then b (held), and stops there.
	play(t, st, a, t0.Add(2*time.Minute), []step{{Name: events.Held, Route: "hpc1"}})
	knownA, err := st.State(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	slow := &pausingStore{Store: st, job: b, reached: make(chan struct{}), resume: make(chan struct{})}
	slowDeps := deps
	slowDeps.Store = slow
	done := make(chan error, 1)
	go func() { done <- decideGroup(ctx, slowDeps, parent, knownA) }()
	select {
	case <-slow.reached:
	case err := <-done:
		t.Fatalf("the decision ended (%v) without reading child b", err)
	case <-time.After(30 * time.Second):
		t.Fatal("the decision never read child b")
	}

	// b resumes; its handler finds a held, b running: the parent is RUNNING already.
	play(t, st, b, t0.Add(3*time.Minute), []step{{Name: events.Resumed, Route: "hpc1"}})
	knownB, err := st.State(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	if knownB.Status != events.StatusRunning {
		t.Fatalf("b is %s after its resume, want RUNNING", knownB.Status)
	}
	before, err := st.State(ctx, parent)
	if err != nil {
		t.Fatal(err)
	}
	if err := decideGroup(ctx, deps, parent, knownB); err != nil {
		t.Fatal(err)
	}
	if after, err := st.State(ctx, parent); err != nil || after.LastSeq != before.LastSeq {
		t.Fatalf("b's handler appended to the parent (%v): the parent should have matched", err)
	}

	close(slow.resume)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the first decision never finished")
	}
	if got := status(); got != events.StatusRunning {
		t.Fatalf("parent %s with a held and b running, want RUNNING: a decision on b read before it resumed stuck", got)
	}
}

// countingStore counts the fresh reads of jobs other than the parent.
type countingStore struct {
	*events.Store
	parent string
	reads  atomic.Int64
}

func (c *countingStore) StateFresh(ctx context.Context, id string) (events.State, error) {
	if id != c.parent {
		c.reads.Add(1)
	}
	return c.Store.StateFresh(ctx, id)
}

// A child event of a running group reads only as many children as show that the parent
// stays RUNNING, not all of them: reading all at every child event made a group of n
// children cost n² reads (400 tasks of a DDS topology: 27 s of the gateway's CPU after
// they had ended). The group still moves when its last child ends.
func TestGroupDecisionReadsFewChildrenWhileTheGroupRuns(t *testing.T) {
	_, st := openBus(t)
	ctx := context.Background()
	const n = 40
	parent := events.NewID()
	ids := make([]string, n)
	for i := range ids {
		ids[i] = events.NewID()
	}
	play(t, st, parent, t0, []step{{Name: events.Submitted, Route: events.RouteGroup,
		Payload: events.Job{ID: parent, Name: "group", Kind: events.KindGroup, Children: ids}}})
	for i, id := range ids {
		steps := life(id, "hpc1", 3*i)[:8] // submitted ... started, RUNNING; exit code 0
		steps[0].Payload = events.Job{ID: id, Name: "child", Executable: "/bin/true", Parent: parent}
		play(t, st, id, t0, steps)
	}
	counting := &countingStore{Store: st, parent: parent}
	deps := Deps{Store: counting, Logger: nopLog(), Now: func() time.Time { return t0.Add(time.Minute) }}
	if err := decideGroup(ctx, deps, parent, events.State{}); err != nil {
		t.Fatal(err)
	}
	p, err := st.State(ctx, parent)
	if err != nil || p.Status != events.StatusRunning {
		t.Fatalf("parent %s (%v), want RUNNING", p.Status, err)
	}

	for i, id := range ids {
		play(t, st, id, t0.Add(time.Hour), life(id, "hpc1", 3*i)[8:]) // exited ... succeeded
		known, err := st.State(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		counting.reads.Store(0)
		if err := decideGroup(ctx, deps, parent, known); err != nil {
			t.Fatal(err)
		}
		reads := counting.reads.Load()
		p, err := st.State(ctx, parent)
		if err != nil {
			t.Fatal(err)
		}
		if i < n-1 {
			if p.Status != events.StatusRunning {
				t.Fatalf("after %d of %d children ended the parent is %s, want RUNNING", i+1, n, p.Status)
			}
			if reads > 2 {
				t.Fatalf("child %d's end read %d children of %d; the next one, still running, shows the parent stays RUNNING", i, reads, n)
			}
			continue
		}
		if p.Status != events.StatusSucceeded || p.Group == nil || p.Group.Counts[events.StatusSucceeded] != n {
			t.Fatalf("after the last child ended the parent is %s (%+v), want SUCCEEDED with %d counted", p.Status, p.Group, n)
		}
	}
}

// A co-allocated subjob that starts after a sibling ended without success is ended
// too: the executor had seen the sibling ready, and the sibling's end had found this
// one not started (the executor's to fail), so without its own start looking at the
// siblings it would run alone.
func TestCoallocatedSubjobStartedAfterASiblingFailedIsCancelled(t *testing.T) {
	st, deps, parent, a, b := groupOfTwo(t)
	ctx := context.Background()
	subjob := func(id string, i int) events.Job {
		return events.Job{ID: id, Name: "subjob", Executable: "/bin/true", Parent: parent,
			Original:     events.Original{Format: "jrdl", Path: fmt.Sprintf("job[0]/subjob[%d]", i)},
			Coallocation: &events.Coallocation{Group: 0, Size: 2}}
	}
	failed := life(a, "hpc1", 0)[:6] // submitted ... queued
	failed[0].Payload = subjob(a, 0)
	failed = append(failed, step{Name: events.Failed, Payload: events.EndData{Reason: "no slot"}})
	play(t, st, a, t0, failed)
	started := life(b, "hpc1", 1)[:7] // submitted ... started
	started[0].Payload = subjob(b, 1)
	play(t, st, b, t0, started)

	h, err := st.Load(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	start := h.Events[len(h.Events)-1]
	if start.Name != events.Started {
		t.Fatalf("b's last event is %s, want started", start.Name)
	}
	if err := groupReact(ctx, deps, start); err != nil {
		t.Fatal(err)
	}
	sb, err := st.State(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	if !sb.CancelRequested {
		t.Fatalf("subjob b started after its sibling a FAILED and was not asked to cancel: %s", sb.Status)
	}
	h, err = st.Load(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	var note events.Note
	if err := h.Events[len(h.Events)-1].Payload(&note); err != nil {
		t.Fatal(err)
	}
	if want := "co-allocated subjob " + a + " (job[0]/subjob[0]) FAILED: no slot"; note.Reason != want {
		t.Fatalf("cancel reason %q, want %q", note.Reason, want)
	}
	// Handled again (a redelivery), it asks nothing more.
	if err := groupReact(ctx, deps, start); err != nil {
		t.Fatal(err)
	}
	if h2, _ := st.Load(ctx, b); len(h2.Events) != len(h.Events) {
		t.Fatalf("a redelivered start added %d events", len(h2.Events)-len(h.Events))
	}
}

// Decisions on one parent take turns; on another they do not wait; and a lock no one
// holds is forgotten.
func TestKeyedMutex(t *testing.T) {
	var k keyedMutex
	unlockA := k.lock("a")
	got := make(chan string, 2)
	go func() {
		defer k.lock("a")()
		got <- "a"
	}()
	go func() {
		defer k.lock("b")()
		got <- "b"
	}()
	if first := <-got; first != "b" {
		t.Fatalf("%s's lock was taken while a held it", first)
	}
	select {
	case <-got:
		t.Fatal("a's lock was taken twice at once")
	case <-time.After(50 * time.Millisecond):
	}
	unlockA()
	if second := <-got; second != "a" {
		t.Fatalf("got %s, want a", second)
	}
	eventually(t, "every lock to be forgotten", func() bool {
		k.mu.Lock()
		defer k.mu.Unlock()
		return len(k.m) == 0
	})
}
