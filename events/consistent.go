package events

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
)

// ErrStale is returned when no read of a job reaches an event the caller already knows
// of (a replica, or a leader just elected, still catching up): the caller must not
// decide anything yet, and a consumer redelivers the event later.
var ErrStale = errors.New("events: the log read is older than the event being handled")

// staleReads bounds how often stateAtLeast reads the stream leader before it gives up
// with ErrStale; the waits between them double from 20ms to 1s (about 4s in all).
const staleReads = 8

// stateAtLeast folds a job up to a stored event whose sequence is at least min. On a
// cluster a direct get may be answered by a replica that is behind the log; a read older
// than min is then repeated against the stream leader, whose answer includes every
// acknowledged write, a bounded number of times.
func (s *Store) stateAtLeast(ctx context.Context, jobID string, need uint64) (State, error) {
	st, err := s.current(ctx, jobID)
	if err != nil || st.LastSeq >= need {
		return st, err
	}
	wait := 20 * time.Millisecond
	for range staleReads {
		if st, err = s.currentWith(ctx, s.leaderGet, jobID); err != nil || st.LastSeq >= need {
			return st, err
		}
		select {
		case <-ctx.Done():
			return State{}, ctx.Err()
		case <-time.After(wait):
		}
		wait = min(wait*2, time.Second)
	}
	return State{}, fmt.Errorf("job %s: read up to sequence %d, need %d: %w", jobID, st.LastSeq, need, ErrStale)
}

// StateFresh returns a job's state including every event the log acknowledged before the
// call, whichever server of a cluster answers. State may be answered by a replica still
// catching up, which is enough for a decision whose append is conditional on the job it
// reads; a decision that reads other jobs too (a group's children, a co-allocated
// subjob's siblings) is not protected by that condition and needs this. On a replicated
// stream the job's last event is read through the stream's leader, and the job is
// folded at least up to it (from this store's cache when it holds that event, from a
// replica when one has it); on a single server every read is fresh and this is State.
func (s *Store) StateFresh(ctx context.Context, jobID string) (State, error) {
	if !s.replicated(ctx) {
		return s.State(ctx, jobID)
	}
	if !validJobID(jobID) {
		return State{}, fmt.Errorf("%w: job id %q", ErrBadEvent, jobID)
	}
	last, found, err := s.leaderGet(ctx, map[string]any{"last_by_subj": JobFilter(jobID)})
	if err != nil {
		return State{}, err
	}
	if !found {
		return State{JobID: jobID}, fmt.Errorf("%w: %s", ErrNotFound, jobID)
	}
	if cached, ok := s.cache.get(jobID); ok && cached.LastSeq == last.Seq {
		return cached, nil
	}
	return s.stateAtLeast(ctx, jobID, last.Seq)
}

// DecideFresh is Decide on a state read by StateFresh at every attempt. Decide may read
// a replica behind the log: a decision that appends is then caught by its condition (a
// conflict), but a decision that finds nothing to do on that old state is believed. For
// a decision whose "nothing" must be true of the log as it is (a sibling not started yet
// is left to the executor, a group already in its children's state is left alone), this
// reads the job fresh each time.
func (s *Store) DecideFresh(ctx context.Context, jobID string, decide Decision) (State, error) {
	for attempt := 0; attempt <= s.retries; attempt++ {
		st, err := s.StateFresh(ctx, jobID)
		if err != nil && !errors.Is(err, ErrNotFound) {
			return st, err
		}
		next, err := s.decideOnce(ctx, st, decide)
		if errors.Is(err, ErrConflict) {
			continue
		}
		return next, err
	}
	return State{}, fmt.Errorf("job %s: %w", jobID, ErrTooManyConflicts)
}

// replicasTTL is how long a store believes what it last read of the stream's replica
// count: an operator may scale the stream up while services run (a gateway started with
// more replicas brings the stream to them), and fresh reads follow within this long.
const replicasTTL = 10 * time.Second

// replicaInfo caches whether the JOBS stream is replicated.
type replicaInfo struct {
	mu         sync.Mutex
	replicated bool
	checked    time.Time
}

// replicated says whether the stream is replicated, as read at most replicasTTL ago.
// When the stream's replica count cannot be read, it is taken as replicated: a read
// through the leader is fresh on any layout, so no read is called fresh that is not.
func (s *Store) replicated(ctx context.Context) bool {
	ri := &s.replicas
	ri.mu.Lock()
	defer ri.mu.Unlock()
	if ri.checked.IsZero() || time.Since(ri.checked) > replicasTTL {
		ictx, cancel := context.WithTimeout(ctx, s.timeout)
		n, err := Replicas(ictx, s.js)
		cancel()
		if err != nil {
			return true
		}
		ri.replicated, ri.checked = n > 1, time.Now()
	}
	return ri.replicated
}

// leaderGet fetches one stored message through the stream's leader
// ($JS.API.STREAM.MSG.GET), which only the leader answers.
func (s *Store) leaderGet(ctx context.Context, req map[string]any) (Event, bool, error) {
	body, _ := json.Marshal(req)
	gctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	m, err := s.nc.RequestWithContext(gctx, "$JS.API.STREAM.MSG.GET."+Stream, body)
	if err != nil {
		return Event{}, false, fmt.Errorf("leader get: %w", err)
	}
	var resp struct {
		Error *struct {
			Code        int    `json:"code"`
			Description string `json:"description"`
		} `json:"error"`
		Message *struct {
			Subject string `json:"subject"`
			Seq     uint64 `json:"seq"`
			Data    []byte `json:"data"`
		} `json:"message"`
	}
	if err := json.Unmarshal(m.Data, &resp); err != nil {
		return Event{}, false, fmt.Errorf("leader get: %w", err)
	}
	switch {
	case resp.Error != nil && resp.Error.Code == 404:
		return Event{}, false, nil
	case resp.Error != nil:
		return Event{}, false, fmt.Errorf("leader get: %d %s", resp.Error.Code, resp.Error.Description)
	case resp.Message == nil:
		return Event{}, false, errors.New("leader get: empty answer")
	}
	stored := &nats.Msg{Data: resp.Message.Data, Header: nats.Header{}}
	stored.Header.Set("Nats-Subject", resp.Message.Subject)
	stored.Header.Set("Nats-Sequence", strconv.FormatUint(resp.Message.Seq, 10))
	e, err := decodeDirect(stored)
	return e, err == nil, err
}
