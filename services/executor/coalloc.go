package executor

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gridwire/gridwire/events"
)

// Co-allocation: the subjobs of one JRDL job start together or not at all. A subjob's
// queued delivery waits here (its heartbeat keeps it) until every sibling is incarnated
// and staged in (QUEUED or further); if a sibling ended without succeeding first (it
// could not be placed, its stage-in failed, it was cancelled), this one does not start
// and fails with the sibling's reason. The wait needs nothing of any executor: siblings
// become QUEUED through the incarnator and the stager, so subjobs on different clusters,
// or more of them than this process has workers, cannot wait on each other. A sibling
// that fails after they started is ended by the watcher, which owns group decisions.

// siblingPoll is how often a waiting subjob looks at its siblings again (a variable
// for tests).
var siblingPoll = 200 * time.Millisecond

// awaitSiblings returns "" once every sibling is ready, or the reason this subjob must
// not start.
//
// Each look goes on from the first sibling the last one found not ready, in the
// parent's order, and stops at the next not ready: a subjob of n waiting on a sibling
// reads its siblings about once over its wait, not n times a poll (a hundred subjobs
// waiting on a slow stage-in read 50,000 states a second). Once a look reaches the
// end, the siblings read on earlier looks are read again at once, so the look that lets
// the subjob start is a whole one, as before: a sibling that was ready and then ended
// without succeeding still keeps it from starting. A sibling that ends badly behind
// one not yet ready is seen when the look reaches it.
func (x *executor) awaitSiblings(ctx context.Context, st events.State) (string, error) {
	from := 0
	for {
		reason, next, err := x.siblingsReady(ctx, st, from)
		if err != nil || reason != "" {
			return reason, err
		}
		if next < 0 { // every sibling from `from` on is ready
			if from == 0 {
				return "", nil
			}
			from = 0 // read the earlier ones again before starting
			continue
		}
		from = next
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(siblingPoll):
		}
	}
}

// siblingsReady looks at the siblings of a co-allocated subjob from the from-th child of
// its parent on, in the parent's order. It returns the reason this one must not start
// (a sibling ended without succeeding), or the index of the first sibling not ready
// (next), or next -1 when every one from there on is ready.
func (x *executor) siblingsReady(ctx context.Context, st events.State, from int) (reason string, next int, err error) {
	parent, err := x.deps.Store.State(ctx, st.Job.Parent)
	if err != nil {
		return "", 0, fmt.Errorf("reading parent %s of co-allocated job %s: %w", st.Job.Parent, st.JobID, err)
	}
	if parent.Job == nil {
		return "", 0, fmt.Errorf("co-allocated job %s: parent %s has no record", st.JobID, st.Job.Parent)
	}
	ids := parent.Job.ChildIDs()
	for i := from; i < len(ids); i++ {
		id := ids[i]
		if id == st.JobID {
			continue
		}
		s, err := x.deps.Store.State(ctx, id)
		if errors.Is(err, events.ErrNotFound) {
			return "", i, nil
		} else if err != nil {
			return "", 0, fmt.Errorf("reading sibling %s of job %s: %w", id, st.JobID, err)
		}
		if s.Job == nil || !s.Job.Coallocated() || s.Job.Coallocation.Group != st.Job.Coallocation.Group {
			continue
		}
		switch s.Status {
		case events.StatusFailed, events.StatusCancelled:
			r := fmt.Sprintf("co-allocated subjob %s (%s) %s before the subjobs started", id, s.Job.Original.Path, s.Status)
			if s.Reason != "" {
				r += ": " + s.Reason
			}
			return r, 0, nil
		case events.StatusNone, events.StatusSubmitted, events.StatusIncarnated, events.StatusStagingIn:
			return "", i, nil
		}
	}
	return "", -1, nil
}

// coallocate holds a co-allocated subjob until its siblings are ready, and fails it when
// one of them cannot start. It returns the state to start from and whether to start.
func (x *executor) coallocate(ctx context.Context, st events.State) (events.State, bool, error) {
	reason, err := x.awaitSiblings(ctx, st)
	if err != nil {
		return st, false, err
	}
	latest, err := x.deps.Store.State(ctx, st.JobID)
	if err != nil {
		return st, false, err
	}
	if latest.LastSeq > st.LastSeq {
		st = latest // a request may have come while it waited
	}
	if reason == "" {
		return st, st.Status == events.StatusQueued && st.NativeID == "", nil
	}
	_, err = x.deps.Store.DecideFrom(ctx, st, func(s events.State) ([]events.Event, error) {
		if s.Status != events.StatusQueued || s.NativeID != "" {
			return nil, nil
		}
		e, err := events.New(s.JobID, events.Failed, "", x.deps.Now(), events.EndData{Reason: reason})
		return []events.Event{e}, err
	})
	x.log.Info("co-allocated job not started", "job", st.JobID, "reason", reason)
	return st, false, err
}
