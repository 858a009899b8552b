package events

import (
	"context"
	"encoding/json"
	"fmt"
)

// Stored returns every event stored under a job's subjects, in stream order, whether or
// not the fold accepts them: what the read API and an auditor show. It walks back through
// the prevseq links from the job's last event and believes the walk only when it met as
// many events as the stream counts under the job's subjects (the server answers that
// from its subject index, not by reading messages), so its cost is the job's length,
// not the stream's. A history whose links do not account for every stored event (one
// written around the store) is read by a forward scan, as before.
func (s *Store) Stored(ctx context.Context, jobID string) ([]Event, error) {
	if !validJobID(jobID) {
		return nil, fmt.Errorf("%w: job id %q", ErrBadEvent, jobID)
	}
	h, ok, err := s.walkBack(ctx, jobID)
	if err != nil {
		return nil, fmt.Errorf("loading job %s: %w", jobID, err)
	}
	if ok {
		n, err := s.countStored(ctx, JobFilter(jobID))
		if err != nil {
			return nil, fmt.Errorf("counting job %s: %w", jobID, err)
		}
		if n == uint64(len(h.Events)) {
			return h.Events, nil
		}
	}
	h, err = s.scanJob(ctx, jobID)
	return h.Events, err
}

// countStored is how many messages the stream holds under subjects matching filter, as
// the stream's subject index counts them ($JS.API.STREAM.INFO with a subject filter).
func (s *Store) countStored(ctx context.Context, filter string) (uint64, error) {
	body, _ := json.Marshal(struct {
		Filter string `json:"subjects_filter"`
	}{filter})
	rctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	m, err := s.nc.RequestWithContext(rctx, "$JS.API.STREAM.INFO."+Stream, body)
	if err != nil {
		return 0, fmt.Errorf("stream info: %w", err)
	}
	var resp struct {
		State struct {
			Subjects map[string]uint64 `json:"subjects"`
		} `json:"state"`
		Error *struct {
			Code        int    `json:"code"`
			Description string `json:"description"`
		} `json:"error"`
	}
	if err := json.Unmarshal(m.Data, &resp); err != nil {
		return 0, fmt.Errorf("stream info: %w", err)
	}
	if resp.Error != nil {
		return 0, fmt.Errorf("stream info: %d %s", resp.Error.Code, resp.Error.Description)
	}
	var n uint64
	for _, c := range resp.State.Subjects {
		n += c
	}
	return n, nil
}
