package events

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Store appends job events with optimistic concurrency and reads them back. It is safe
// for concurrent use.
type Store struct {
	nc      *nats.Conn
	js      jetstream.JetStream
	source  string
	timeout time.Duration
	retries int
}

// StoreOption tunes a Store.
type StoreOption func(*Store)

// WithTimeout bounds each request to the server (default 5s).
func WithTimeout(d time.Duration) StoreOption { return func(s *Store) { s.timeout = d } }

// WithConflictRetries bounds how often Decide reloads after a conflict (default 16).
func WithConflictRetries(n int) StoreOption { return func(s *Store) { s.retries = n } }

// NewStore returns a store whose events carry the given source (the emitting service
// instance, e.g. "gridwire/executor/host-1").
func NewStore(nc *nats.Conn, js jetstream.JetStream, source string, opts ...StoreOption) *Store {
	s := &Store{nc: nc, js: js, source: source, timeout: 5 * time.Second, retries: 16}
	for _, o := range opts {
		o(s)
	}
	return s
}

// Source is the CloudEvents source this store stamps on events without one.
func (s *Store) Source() string { return s.source }

// History is a job's events in stream order.
type History struct {
	Events  []Event
	LastSeq uint64
}

// Load returns every event of a job in order. A job with no events is an empty history,
// not an error.
func (s *Store) Load(ctx context.Context, jobID string) (History, error) {
	if !validJobID(jobID) {
		return History{}, fmt.Errorf("%w: job id %q", ErrBadEvent, jobID)
	}
	var h History
	next := uint64(1)
	for {
		batch, more, err := s.directBatch(ctx, JobFilter(jobID), next, 0)
		if err != nil {
			return History{}, fmt.Errorf("loading job %s: %w", jobID, err)
		}
		h.Events = append(h.Events, batch...)
		if len(batch) > 0 {
			h.LastSeq = batch[len(batch)-1].Seq
			next = h.LastSeq + 1
		}
		if !more || len(batch) == 0 {
			return h, nil
		}
	}
}

// State loads and folds a job.
func (s *Store) State(ctx context.Context, jobID string) (State, error) {
	h, err := s.Load(ctx, jobID)
	if err != nil {
		return State{}, err
	}
	if len(h.Events) == 0 {
		return State{}, fmt.Errorf("%w: %s", ErrNotFound, jobID)
	}
	return Replay(h.Events)
}

// ReadRange returns up to max events of the whole stream from sequence `from` on,
// and whether more follow. It serves replays and the read side.
func (s *Store) ReadRange(ctx context.Context, from uint64, max int) ([]Event, bool, error) {
	return s.directBatch(ctx, SubjectAll, from, max)
}

// Scan is ReadRange restricted to a subject filter (TypeFilter, JobFilter, ...).
func (s *Store) Scan(ctx context.Context, filter string, from uint64, max int) ([]Event, bool, error) {
	return s.directBatch(ctx, filter, from, max)
}

// Append stores one event for a job, conditional on the job's last stream sequence
// being `expect` (0 for a new job) and chained to `prevHash`. It returns the event's
// sequence. ErrConflict means someone else wrote first: reload and decide again.
// A timeout or conflict is resolved by reading the job's last message: if it is this
// event, the append landed and its sequence is returned.
func (s *Store) Append(ctx context.Context, expect uint64, prevHash string, e Event) (uint64, error) {
	if e.Source == "" {
		e.Source = s.source
	}
	e.PrevHash = prevHash
	body, err := e.Encode()
	if err != nil {
		return 0, err
	}
	msg := &nats.Msg{Subject: e.subject(), Data: body, Header: nats.Header{}}
	opts := []jetstream.PublishOpt{jetstream.WithMsgID(e.ID),
		jetstream.WithExpectLastSequenceForSubject(expect, JobFilter(e.JobID))}
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		pctx, cancel := context.WithTimeout(ctx, s.timeout)
		ack, err := s.js.PublishMsg(pctx, msg, opts...)
		cancel()
		if err == nil {
			return ack.Sequence, nil
		}
		lastErr = err
		if !isConflict(err) && !isTimeout(err) {
			return 0, fmt.Errorf("appending %s to job %s: %w", e.Name, e.JobID, err)
		}
		seq, landed, lerr := s.landed(ctx, e)
		if lerr == nil && landed {
			return seq, nil
		}
		if isConflict(err) && lerr == nil {
			return 0, fmt.Errorf("appending %s to job %s at %d: %w", e.Name, e.JobID, expect, ErrConflict)
		}
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
	}
	return 0, fmt.Errorf("appending %s to job %s: %w", e.Name, e.JobID, lastErr)
}

// landed reads the job's last message and reports whether it is the given event.
func (s *Store) landed(ctx context.Context, e Event) (uint64, bool, error) {
	gctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	req, _ := json.Marshal(map[string]string{"last_by_subj": JobFilter(e.JobID)})
	m, err := s.nc.RequestWithContext(gctx, "$JS.API.DIRECT.GET."+Stream, req)
	if err != nil {
		return 0, false, err
	}
	switch m.Header.Get("Status") {
	case "":
	case "404":
		return 0, false, nil
	default:
		return 0, false, fmt.Errorf("direct get: status %s", m.Header.Get("Status"))
	}
	seq, _ := strconv.ParseUint(m.Header.Get("Nats-Sequence"), 10, 64)
	return seq, m.Header.Get(jetstream.MsgIDHeader) == e.ID, nil
}

// Decision is what a service wants appended after seeing a job's state; nil or empty
// means nothing to do (the work is already recorded).
type Decision func(State) ([]Event, error)

// Decide loads a job, folds it, asks decide what to append, and appends it conditionally.
// On a conflict it reloads and asks again, a bounded number of times. It returns the
// state after the appended events.
func (s *Store) Decide(ctx context.Context, jobID string, decide Decision) (State, error) {
	for attempt := 0; attempt <= s.retries; attempt++ {
		h, err := s.Load(ctx, jobID)
		if err != nil {
			return State{}, err
		}
		st, err := Replay(h.Events)
		if err != nil {
			return st, fmt.Errorf("folding job %s: %w", jobID, err)
		}
		st, err = s.decideOnce(ctx, st, decide)
		if errors.Is(err, ErrConflict) {
			continue
		}
		return st, err
	}
	return State{}, fmt.Errorf("job %s: %w", jobID, ErrTooManyConflicts)
}

// DecideFrom is Decide starting from a state the caller already folded (for instance the
// one the consumed event produced). A conflict falls back to loading.
func (s *Store) DecideFrom(ctx context.Context, st State, decide Decision) (State, error) {
	next, err := s.decideOnce(ctx, st, decide)
	if errors.Is(err, ErrConflict) {
		return s.Decide(ctx, st.JobID, decide)
	}
	return next, err
}

func (s *Store) decideOnce(ctx context.Context, st State, decide Decision) (State, error) {
	evs, err := decide(st)
	if err != nil || len(evs) == 0 {
		return st, err
	}
	for _, e := range evs {
		if e.JobID == "" {
			e.JobID = st.JobID
		}
		if e.Source == "" {
			e.Source = s.source
		}
		e.PrevHash = st.LastHash
		// Fold before appending: an illegal event is refused without touching the log.
		if _, err := Apply(st, e); err != nil {
			return st, err
		}
		seq, err := s.Append(ctx, st.LastSeq, st.LastHash, e)
		if err != nil {
			return st, err
		}
		e.Seq, e.Subject = seq, e.subject()
		body, _ := e.Encode()
		e.Hash = HashOf(body)
		if st, err = Apply(st, e); err != nil {
			return st, err
		}
	}
	return st, nil
}

// Create appends a new job's first event, refusing if the job already has events.
func (s *Store) Create(ctx context.Context, e Event) (uint64, error) {
	return s.Append(ctx, 0, "", e)
}

// directBatch fetches messages matching filter from seq on with a batched direct get
// ($JS.API.DIRECT.GET), reading until the server's end-of-batch marker.
func (s *Store) directBatch(ctx context.Context, filter string, from uint64, max int) ([]Event, bool, error) {
	if max <= 0 {
		max = 1024
	}
	req, _ := json.Marshal(struct {
		Seq     uint64 `json:"seq"`
		NextFor string `json:"next_by_subj"`
		Batch   int    `json:"batch"`
	}{from, filter, max})
	inbox := s.nc.NewRespInbox()
	sub, err := s.nc.SubscribeSync(inbox)
	if err != nil {
		return nil, false, err
	}
	defer sub.Unsubscribe()
	if err := s.nc.PublishRequest("$JS.API.DIRECT.GET."+Stream, inbox, req); err != nil {
		return nil, false, err
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	var out []Event
	for {
		m, err := sub.NextMsgWithContext(ctx)
		if err != nil {
			return nil, false, fmt.Errorf("direct get: %w", err)
		}
		switch m.Header.Get("Status") {
		case "404":
			return out, false, nil
		case "204":
			pending, _ := strconv.ParseUint(m.Header.Get("Nats-Num-Pending"), 10, 64)
			return out, pending > 0, nil
		case "":
		case "503":
			return nil, false, nats.ErrNoResponders
		default:
			return nil, false, fmt.Errorf("direct get: status %s %s", m.Header.Get("Status"), m.Header.Get("Description"))
		}
		e, err := decodeStored(m)
		if err != nil {
			return nil, false, err
		}
		out = append(out, e)
	}
}

func decodeStored(m *nats.Msg) (Event, error) {
	e, err := Decode(m.Data)
	if err != nil {
		return Event{}, fmt.Errorf("stored message %s: %w", m.Header.Get("Nats-Sequence"), err)
	}
	e.Subject = m.Header.Get("Nats-Subject")
	e.Seq, _ = strconv.ParseUint(m.Header.Get("Nats-Sequence"), 10, 64)
	if _, _, route, err := ParseSubject(e.Subject); err == nil && route != NoRoute {
		e.Route = route
	}
	return e, nil
}

func isConflict(err error) bool {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		return apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
			apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant
	}
	return false
}

func isTimeout(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) ||
		errors.Is(err, jetstream.ErrNoStreamResponse) || isNoResponders(err)
}

func isNoResponders(err error) bool {
	return errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrNoStreamResponse)
}
