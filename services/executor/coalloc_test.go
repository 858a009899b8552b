package executor

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gridwire/gridwire/events"
)

// siblingStore is a parent of n co-allocated subjobs whose states move with time, time
// being how often the parent was read (once a look): sibling i is STAGING_IN until look
// readyAt[i], then QUEUED, and ends endAt[i] with endAs when that is set.
type siblingStore struct {
	mu      sync.Mutex
	ids     []string
	readyAt []int
	endAt   map[int]int
	endAs   events.Status
	looks   int // reads of the parent
	reads   int // reads of a sibling
}

func newSiblingStore(readyAt []int) *siblingStore {
	s := &siblingStore{readyAt: readyAt, endAt: map[int]int{}}
	for i := range readyAt {
		s.ids = append(s.ids, fmt.Sprintf("SUB%02d", i))
	}
	return s
}

func (s *siblingStore) job(id string) *events.Job {
	return &events.Job{ID: id, Parent: "PARENT", Coallocation: &events.Coallocation{Group: 0, Size: len(s.ids)},
		Original: events.Original{Path: "/job/" + id}}
}

func (s *siblingStore) State(_ context.Context, id string) (events.State, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if id == "PARENT" {
		s.looks++
		return events.State{JobID: id, Status: events.StatusRunning, Job: &events.Job{ID: id, Kind: events.KindGroup, Children: s.ids}}, nil
	}
	s.reads++
	for i, sid := range s.ids {
		if sid != id {
			continue
		}
		st := events.State{JobID: id, Status: events.StatusStagingIn, Job: s.job(id)}
		if s.looks >= s.readyAt[i] {
			st.Status = events.StatusQueued
		}
		if at, ok := s.endAt[i]; ok && s.looks >= at {
			st.Status, st.Reason = s.endAs, "stage-in failed"
		}
		return st, nil
	}
	return events.State{}, events.ErrNotFound
}

func (s *siblingStore) StateAt(context.Context, events.Event) (events.State, error) {
	return events.State{}, errors.New("not used")
}

func (s *siblingStore) DecideFrom(context.Context, events.State, events.Decision) (events.State, error) {
	return events.State{}, errors.New("not used")
}

func awaitWith(t *testing.T, s *siblingStore, self int) (string, error) {
	t.Helper()
	defer func(p time.Duration) { siblingPoll = p }(siblingPoll)
	siblingPoll = time.Millisecond
	x := &executor{deps: Deps{Store: s}}
	st := events.State{JobID: s.ids[self], Status: events.StatusQueued, Job: s.job(s.ids[self])}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return x.awaitSiblings(ctx, st)
}

// A subjob waiting for its siblings reads each about once over its wait, not all of
// them at every look: here 60 subjobs become ready one look apart, in the parent's
// order, the last at look 60. Reading every sibling at every look took 59 reads a look
// (about 3,500 here); each look now goes on from where the last one stopped.
func TestCoallocatedSubjobReadsItsSiblingsOnceOverItsWait(t *testing.T) {
	const n = 60
	readyAt := make([]int, n)
	for i := range readyAt {
		readyAt[i] = i + 1
	}
	s := newSiblingStore(readyAt)
	reason, err := awaitWith(t, s, 0)
	if err != nil || reason != "" {
		t.Fatalf("await: %q, %v", reason, err)
	}
	if s.looks < n {
		t.Fatalf("started after %d looks, before the last sibling was ready (look %d)", s.looks, n)
	}
	// One read a look for the sibling it waits on, each sibling once as the look passes
	// it, and the whole look before the start.
	if limit := s.looks + 2*n; s.reads > limit {
		t.Fatalf("%d sibling reads over %d looks, want at most %d", s.reads, s.looks, limit)
	}
}

// The look that lets a subjob start is a whole one: a sibling that was ready on an
// earlier look and has since failed still keeps this one from starting, with its
// reason.
func TestCoallocatedSubjobDoesNotStartAfterAnEarlierReadySiblingFailed(t *testing.T) {
	s := newSiblingStore([]int{1, 1, 1, 5})
	s.endAt[1], s.endAs = 3, events.StatusFailed // ready at look 1, failed at look 3
	reason, err := awaitWith(t, s, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(reason, "SUB01") || !strings.Contains(reason, "FAILED") || !strings.Contains(reason, "stage-in failed") {
		t.Fatalf("reason %q, want SUB01's failure", reason)
	}
}

// A sibling that failed behind one not yet ready is seen once the look reaches it.
func TestCoallocatedSubjobSeesAFailureBehindAWaitingSibling(t *testing.T) {
	s := newSiblingStore([]int{1, 4, 1, 100})
	s.endAt[2], s.endAs = 1, events.StatusCancelled
	reason, err := awaitWith(t, s, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(reason, "SUB02") || !strings.Contains(reason, "CANCELLED") {
		t.Fatalf("reason %q, want SUB02's cancellation", reason)
	}
	if s.looks > 10 {
		t.Fatalf("the failure was seen after %d looks", s.looks)
	}
}
