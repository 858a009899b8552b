package events

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
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
