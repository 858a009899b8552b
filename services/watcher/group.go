package watcher

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/gridwire/gridwire/events"
)

// The watcher owns group decisions: it is the one service that appends to a parent
// record's subject. Two consumers do it:
//
//   - runGroups reacts to every child event that can move its parent (a start, a status,
//     a hold, a resume, an end), and to a parent's own submission (a parent with no
//     children is done as soon as it exists): it folds the parent's children, derives the parent's
//     state (events.GroupOf) and appends the difference conditionally on the parent's
//     subject. An end that breaks a co-allocated job (a subjob that failed or was
//     cancelled, under the default policy) also asks each running sibling to cancel.
//   - runGroupRequests carries a request made of a parent (cancel, hold, resume) to
//     every child that can take it, as that child's own request, routed to its cluster;
//     the executors carry those out as they do any other.
//
// Both are idempotent: the parent's state and the children's flags say what is done.

// groupMoves are the child events after which a parent may move.
var groupMoves = []events.Name{events.Started, events.StatusChanged, events.Held, events.Resumed,
	events.Exited, events.Succeeded, events.Failed, events.Cancelled}

func runGroups(ctx context.Context, deps Deps) error {
	deps.parents = &keyedMutex{}
	var filters []string
	for _, n := range groupMoves {
		filters = append(filters, events.TypeFilter(n, ""))
	}
	filters = append(filters, events.TypeFilter(events.Submitted, events.RouteGroup))
	return events.Consume(ctx, deps.JS, events.ConsumerSpec{
		Durable: "watcher-groups", Filters: filters, Workers: 8, Logger: deps.Logger,
	}, func(ctx context.Context, d events.Delivery) error {
		err := groupReact(ctx, deps, d.Event)
		if errors.Is(err, events.ErrIllegalTransition) {
			deps.Logger.Error("group decision refused", "job", d.Event.JobID, "err", err)
			return nil
		}
		return err
	})
}

// groupReact follows one child event up to its parent, or decides on a parent just
// submitted.
func groupReact(ctx context.Context, deps Deps, e events.Event) error {
	child, err := deps.Store.StateAt(ctx, e)
	if err != nil {
		return err
	}
	if child.Job == nil {
		return nil
	}
	parent := child.Job.Parent
	if child.Job.Kind == events.KindGroup {
		if e.Name != events.Submitted {
			return nil // the parent's own group events, which this consumer wrote
		}
		parent = child.JobID
	}
	if parent == "" {
		return nil
	}
	endedBadly := e.Name.Terminal() && e.Name != events.Succeeded
	if child.Job.Coallocated() && (endedBadly || e.Name == events.Started) {
		children, err := groupChildren(ctx, deps, parent)
		if err != nil {
			return err
		}
		if endedBadly {
			err = endSiblings(ctx, deps, child, children)
		} else {
			err = endLateStart(ctx, deps, child, children)
		}
		if err != nil {
			return err
		}
	}
	return decideGroup(ctx, deps, parent, child)
}

// endLateStart ends a co-allocated subjob that started after a sibling had ended
// without success. The executor checks its siblings before it starts a subjob, and
// endSiblings asks only siblings already started to cancel; a sibling that ended
// between the two (the executor saw it ready, the watcher saw this one not started)
// would leave this one running alone. Its start is read after it is stored, so one of
// the two sees the other: this one's start sees the sibling's end, or the end sees the
// start.
func endLateStart(ctx context.Context, deps Deps, started events.State, children []events.State) error {
	for _, c := range children {
		if c.JobID == started.JobID || c.Job == nil || !c.Job.Coallocated() ||
			c.Job.Coallocation.Group != started.Job.Coallocation.Group {
			continue
		}
		if c.Status == events.StatusFailed || c.Status == events.StatusCancelled {
			if err := endSiblings(ctx, deps, c, children); err != nil {
				return err
			}
		}
	}
	return nil
}

// groupRounds bounds how often one handler decides a parent again after its own append
// (decideGroup); a handler that reaches it fails, and its event is delivered again.
const groupRounds = 8

// decideGroup appends what moves a parent record to the state its children give it.
//
// The append is conditional on the parent's state, not on the children's, so three
// rules keep a decision made on children read a moment ago from sticking wrongly:
//   - The children are read inside the decision, after the parent. Read before it, a
//     handler that had seen them RUNNING could append RUNNING after another had seen
//     them HELD and appended HELD (8 workers did), and the parent stayed RUNNING over
//     two held children. Read after it, a decision that lands in between makes this
//     one's append conflict, and it is made again on fresh reads.
//   - After its own append, a handler decides again, until it finds nothing to do. A
//     handler that read a child just before that child moved, and appended after the
//     handler of the move had found nothing to do (the parent already matched), would
//     otherwise leave the parent on the state it read: a child held, its sibling read
//     still held just before it resumed, and the parent HELD over a running child. Its
//     second round reads both after its append, so after the move.
//   - Every read is fresh (StateFresh, DecideFresh): on a cluster a replica behind the
//     log could show a child before a move the log already holds, and a decision of
//     nothing made on it would be believed.
//
// Then the last append to a parent is followed by a round that reads every child after
// it, and a child's later move has a handler of its own that reads the parent after
// that append. known is the child whose event is being handled, as read at least up to
// that event.
//
// In one process the decisions on one parent take turns (deps.parents): the workers
// would otherwise all read a big group's children at once for the same move, and all
// but one append would conflict. While a parent of 2,000 children was still SUBMITTED,
// eight such decisions at a time kept it so for 6 s of its 11 s run. Decisions on other
// parents go on beside them; two watcher processes are still kept right by the rules
// above.
func decideGroup(ctx context.Context, deps Deps, parent string, known events.State) error {
	if deps.parents != nil {
		defer deps.parents.lock(parent)()
	}
	for round := 1; ; round++ {
		moved := false
		_, err := deps.Store.DecideFresh(ctx, parent, func(p events.State) ([]events.Event, error) {
			moved = false
			if p.Job == nil || p.Job.Kind != events.KindGroup || p.Status.Terminal() {
				return nil, nil // a parent that ended never moves again (events.GroupEvent)
			}
			children, err := childrenToDecide(ctx, deps, p, known)
			if err != nil || children == nil {
				return nil, err
			}
			name, payload := events.GroupEvent(p, events.GroupOf(children))
			if name == "" {
				return nil, nil
			}
			ev, err := events.New(p.JobID, name, "", deps.Now(), payload)
			moved = err == nil
			return []events.Event{ev}, err
		})
		if err != nil || !moved {
			return err
		}
		if round == groupRounds {
			return fmt.Errorf("group %s: still moving after %d decisions in a row; deciding again later", parent, round)
		}
	}
}

// keyedMutex is a lock per key, held by whoever decides on that key; a key's lock goes
// away when no one holds or waits for it.
type keyedMutex struct {
	mu sync.Mutex
	m  map[string]*keyedLock
}

type keyedLock struct {
	mu    sync.Mutex
	users int
}

// lock takes key's lock and returns what releases it.
func (k *keyedMutex) lock(key string) (unlock func()) {
	k.mu.Lock()
	if k.m == nil {
		k.m = map[string]*keyedLock{}
	}
	l := k.m[key]
	if l == nil {
		l = &keyedLock{}
		k.m[key] = l
	}
	l.users++
	k.mu.Unlock()
	l.mu.Lock()
	return func() {
		l.mu.Unlock()
		k.mu.Lock()
		if l.users--; l.users == 0 {
			delete(k.m, key)
		}
		k.mu.Unlock()
	}
}

// childrenToDecide reads a parent's children for a decision, in the parent's order, or
// returns nil when what it read already shows that the parent stays as it is, whatever
// the children not read are: a RUNNING parent with a child still going (neither ended
// nor held) stays RUNNING, since its children are then neither all ended nor all held
// (events.GroupOf; a verdict of SUBMITTED never moves a parent). Every child event of a
// group reaches this, so reading all children each time made a group of n children cost
// n² reads: 400 one-second tasks of a DDS topology kept the gateway busy for 27 s of CPU
// after they had all ended. The reads begin with the child whose event is handled and go
// on with the ones after it in the parent's order, which have usually not ended yet, so
// such a decision usually reads one or two children. A parent that moves (and a HELD or
// SUBMITTED one) has all of them read, for its summary's counts.
func childrenToDecide(ctx context.Context, deps Deps, p events.State, known events.State) ([]events.State, error) {
	ids := p.Job.ChildIDs()
	start := 0
	for i, id := range ids {
		if id == known.JobID {
			start = i
			break
		}
	}
	out := make([]events.State, len(ids))
	for k := range ids {
		i := (start + k) % len(ids)
		c, err := childState(ctx, deps, p.JobID, ids[i])
		if err != nil {
			return nil, err
		}
		if c.JobID == known.JobID && c.LastSeq < known.LastSeq {
			c = known
		}
		if p.Status == events.StatusRunning && going(c) {
			return nil, nil
		}
		out[i] = c
	}
	return out, nil
}

// going reports whether a child counts, for its parent, as neither ended nor held
// (events.GroupOf): not read yet, about to run again, or on its way or running.
func going(c events.State) bool {
	return c.Status == events.StatusNone || c.Restartable() ||
		(!c.Status.Terminal() && c.Status != events.StatusHeld)
}

// groupChildren folds every child of a parent record, in the parent's order.
func groupChildren(ctx context.Context, deps Deps, parentID string) ([]events.State, error) {
	p, err := deps.Store.StateFresh(ctx, parentID)
	if err != nil {
		return nil, fmt.Errorf("reading parent %s: %w", parentID, err)
	}
	return childrenOf(ctx, deps, p)
}

// childrenOf folds every child of a parent record as the log holds it now (StateFresh),
// in the parent's order.
func childrenOf(ctx context.Context, deps Deps, p events.State) ([]events.State, error) {
	if p.Job == nil {
		return nil, nil
	}
	parentID := p.JobID
	ids := p.Job.ChildIDs()
	out := make([]events.State, 0, len(ids))
	for _, id := range ids {
		c, err := childState(ctx, deps, parentID, id)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

// childState folds one child of a parent record as the log holds it now; a child whose
// submission is not stored yet is an empty state of its ID.
func childState(ctx context.Context, deps Deps, parentID, id string) (events.State, error) {
	c, err := deps.Store.StateFresh(ctx, id)
	if err != nil && !errors.Is(err, events.ErrNotFound) {
		return events.State{}, fmt.Errorf("reading child %s of %s: %w", id, parentID, err)
	}
	c.JobID = id
	return c, nil
}

// endSiblings asks every started sibling of a co-allocated subjob that ended without
// success to cancel, with the subjob's reason, unless its policy lets them continue. A
// sibling not started yet never starts: the executor fails it (coalloc.go), and a
// cancel raced with that, ending it CANCELLED "before it was queued" without the reason.
func endSiblings(ctx context.Context, deps Deps, ended events.State, children []events.State) error {
	j := ended.Job
	if !j.Coallocated() || j.Coallocation.OnSiblingEnd == events.SiblingsContinue {
		return nil
	}
	reason := fmt.Sprintf("co-allocated subjob %s (%s) %s", ended.JobID, j.Original.Path, ended.Status)
	if ended.Reason != "" {
		reason += ": " + ended.Reason
	}
	for _, id := range events.Siblings(j, children) {
		// Fresh: a sibling read before its start would be left to the executor, running.
		_, err := deps.Store.DecideFresh(ctx, id, func(s events.State) ([]events.Event, error) {
			// A sibling that has not started is the executor's: it fails it with this
			// subjob's reason before it starts (co-allocation, all or none).
			if s.Status.Terminal() || s.CancelRequested || s.NativeID == "" {
				return nil, nil
			}
			ev, err := events.New(s.JobID, events.CancelRequested, s.Cluster, deps.Now(), events.Note{Reason: reason})
			return []events.Event{ev}, err
		})
		if err != nil {
			return fmt.Errorf("ending sibling %s of %s: %w", id, ended.JobID, err)
		}
	}
	return nil
}

// runGroupRequests fans a parent's requests out to its children. Requests on parent
// records carry no route (a parent has no cluster), so the consumer filters on that.
func runGroupRequests(ctx context.Context, deps Deps) error {
	return events.Consume(ctx, deps.JS, events.ConsumerSpec{
		Durable: "watcher-group-requests",
		Filters: []string{events.TypeFilter(events.CancelRequested, events.NoRoute),
			events.TypeFilter(events.HoldRequested, events.NoRoute), events.TypeFilter(events.ResumeRequested, events.NoRoute)},
		Workers: 4, Logger: deps.Logger,
	}, func(ctx context.Context, d events.Delivery) error {
		p, err := deps.Store.StateAt(ctx, d.Event)
		if err != nil || p.Job == nil || p.Job.Kind != events.KindGroup {
			return err
		}
		note := events.Note{Reason: fmt.Sprintf("%s on group %s", d.Event.Name, p.JobID)}
		var n events.Note
		if d.Event.Payload(&n) == nil && n.Reason != "" {
			note.Reason += ": " + n.Reason
		}
		for _, id := range p.Job.ChildIDs() {
			if err := requestChild(ctx, deps, id, d.Event, note); err != nil {
				return err
			}
		}
		return nil
	})
}

// requestChild makes a parent's request of one child, when the child can take it and
// has not been asked already. The child is read fresh: a resume decided on a read from
// before the child was held would find nothing to resume, and it would stay held.
func requestChild(ctx context.Context, deps Deps, id string, req events.Event, note events.Note) error {
	_, err := deps.Store.DecideFresh(ctx, id, func(s events.State) ([]events.Event, error) {
		if !takes(s, req.Name) {
			return nil, nil
		}
		ev, err := events.New(s.JobID, req.Name, s.Cluster, deps.Now(), note)
		ev.Principal = req.Principal
		return []events.Event{ev}, err
	})
	if errors.Is(err, events.ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("carrying %s to child %s: %w", req.Name, id, err)
	}
	return nil
}

// takes reports whether a child can take a request it has not taken yet.
func takes(s events.State, n events.Name) bool {
	if s.Status == events.StatusNone || s.Status.Terminal() {
		return false
	}
	switch n {
	case events.CancelRequested:
		return !s.CancelRequested
	case events.HoldRequested:
		return !s.HoldRequested && s.Status != events.StatusHeld && !s.CancelRequested
	case events.ResumeRequested:
		return !s.ResumeRequested && (s.Status == events.StatusHeld || s.HoldRequested)
	}
	return false
}
