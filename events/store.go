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
	cache   *stateCache
	key     *SigningKey
	viaJS   bool    // appends publish through js, not pipe
	pipe    ackPipe // the store's own publishing and acknowledgements (append_pipe.go)
	// replicas says whether the stream is replicated, for fresh reads (consistent.go).
	replicas replicaInfo
	// anyReplica is how a job's state is read when any replica may answer: directGet,
	// or in a test one that lags the log as a replica catching up does.
	anyReplica getter
}

// StoreOption tunes a Store.
type StoreOption func(*Store)

// WithTimeout bounds each request to the server (default 5s).
func WithTimeout(d time.Duration) StoreOption { return func(s *Store) { s.timeout = d } }

// WithStateCache keeps up to n folded job states in memory (default 65536; 0 disables).
func WithStateCache(n int) StoreOption { return func(s *Store) { s.cache = newStateCache(n) } }

// WithSharedCache makes the store use a cache shared with other stores of the process.
func WithSharedCache(c *StateCache) StoreOption { return func(s *Store) { s.cache = c } }

// WithConflictRetries bounds how often Decide reloads after a conflict (default 16).
func WithConflictRetries(n int) StoreOption { return func(s *Store) { s.retries = n } }

// WithSigningKey signs every event the store appends with key, and refuses (before
// anything is written) an event the key's role may not write.
func WithSigningKey(key *SigningKey) StoreOption { return func(s *Store) { s.key = key } }

// WithJetStreamPublish makes every append publish through the store's JetStream client
// (PublishMsg, and PublishMsgAsync for CreateAll) rather than on its connection with
// acknowledgements of its own, as appends did before the pipe: the yardstick of the
// pipe's tests and benchmarks. Fault tests inject into the pipe (WithPublishFaults).
func WithJetStreamPublish() StoreOption { return func(s *Store) { s.viaJS = true } }

// PublishFault is, in fault tests, what happens to one append on its way to the server:
// dropped (no server sees it, and the store hears nothing until its timeout), or stored
// with its acknowledgement lost (the store hears nothing either). It is asked once for
// every message the store sends.
type PublishFault func() (drop, loseAck bool)

// WithPublishFaults injects f's faults into the appends the store sends on its own
// connection (every append, unless WithJetStreamPublish): for fault tests
// (pkg/natsfault's Injector.PublishFault).
func WithPublishFaults(f PublishFault) StoreOption {
	return func(s *Store) { s.pipe.fault = func(int) (bool, bool) { return f() } }
}

// NewStore returns a store whose events carry the given source (the emitting service
// instance, e.g. "gridwire/executor/host-1").
func NewStore(nc *nats.Conn, js jetstream.JetStream, source string, opts ...StoreOption) *Store {
	s := &Store{nc: nc, js: js, source: source, timeout: 5 * time.Second, retries: 16, cache: newStateCache(1 << 16)}
	s.anyReplica = s.directGet
	for _, o := range opts {
		o(s)
	}
	return s
}

// piped says whether appends go through the store's own pipe (append_pipe.go) rather
// than through its JetStream client.
func (s *Store) piped() bool { return s.nc != nil && !s.viaJS }

// Source is the CloudEvents source this store stamps on events without one.
func (s *Store) Source() string { return s.source }

// History is a job's events in stream order.
type History struct {
	Events  []Event
	LastSeq uint64
}

// Load returns every event of a job in order. A job with no events is an empty history,
// not an error. It reads the job's last event and walks back through each event's
// prevseq link, so its cost is the job's length, not the stream's; a history with an
// event that has no link (written by something other than a Store) is read by a forward
// scan instead.
func (s *Store) Load(ctx context.Context, jobID string) (History, error) {
	if !validJobID(jobID) {
		return History{}, fmt.Errorf("%w: job id %q", ErrBadEvent, jobID)
	}
	h, ok, err := s.walkBack(ctx, jobID)
	if err != nil {
		return History{}, fmt.Errorf("loading job %s: %w", jobID, err)
	}
	if ok {
		return h, nil
	}
	return s.scanJob(ctx, jobID)
}

// walkBack follows prevseq links from the job's last event. ok is false when a link is
// missing or does not lead to an event of the same job.
func (s *Store) walkBack(ctx context.Context, jobID string) (History, bool, error) {
	last, found, err := s.directGet(ctx, map[string]any{"last_by_subj": JobFilter(jobID)})
	if err != nil || !found {
		return History{}, err == nil, err
	}
	evs, ok, err := s.walkTo(ctx, last, 0)
	if err != nil || !ok {
		return History{}, ok, err
	}
	return History{Events: evs, LastSeq: last.Seq}, true, nil
}

// walkTo returns, in order, the job's events after sequence `after` up to and including
// last, read backwards through prevseq links. With after = 0 it must reach the job's
// submitted event. ok is false when the links do not lead there.
func (s *Store) walkTo(ctx context.Context, last Event, after uint64) ([]Event, bool, error) {
	return s.walkWith(ctx, s.directGet, last, after)
}

// getter reads one stored message: directGet (any replica) or leaderGet (the leader).
type getter func(ctx context.Context, req map[string]any) (Event, bool, error)

func (s *Store) walkWith(ctx context.Context, get getter, last Event, after uint64) ([]Event, bool, error) {
	rev := []Event{last}
	for e := last; e.PrevSeq != after; {
		if e.PrevSeq == 0 || e.PrevSeq < after {
			return nil, false, nil
		}
		prev, found, err := get(ctx, map[string]any{"seq": e.PrevSeq})
		if err != nil {
			return nil, false, err
		}
		if !found || prev.JobID != last.JobID || prev.Seq >= e.Seq {
			return nil, false, nil
		}
		rev = append(rev, prev)
		e = prev
	}
	if after == 0 && rev[len(rev)-1].Name != Submitted {
		return nil, false, nil
	}
	evs := make([]Event, len(rev))
	for i, e := range rev {
		evs[len(rev)-1-i] = e
	}
	return evs, true, nil
}

// scanJob reads a job's events by scanning the stream forward for its subjects.
func (s *Store) scanJob(ctx context.Context, jobID string) (History, error) {
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

// directGet fetches one stored message with a direct get request, which any replica
// of the stream may answer: on a cluster it can be behind the log (see leaderGet).
func (s *Store) directGet(ctx context.Context, req map[string]any) (Event, bool, error) {
	body, _ := json.Marshal(req)
	gctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	m, err := s.nc.RequestWithContext(gctx, "$JS.API.DIRECT.GET."+Stream, body)
	if err != nil {
		return Event{}, false, fmt.Errorf("direct get: %w", err)
	}
	switch m.Header.Get("Status") {
	case "":
	case "404":
		return Event{}, false, nil
	default:
		return Event{}, false, fmt.Errorf("direct get: status %s %s", m.Header.Get("Status"), m.Header.Get("Description"))
	}
	e, err := decodeDirect(m)
	return e, err == nil, err
}

// State returns a job's current folded state.
func (s *Store) State(ctx context.Context, jobID string) (State, error) {
	st, err := s.current(ctx, jobID)
	if err == nil && st.Status == StatusNone {
		return st, fmt.Errorf("%w: %s", ErrNotFound, jobID)
	}
	return st, err
}

// current folds a job up to its last stored event as any replica reports it. When this
// store has folded the job before, only the events after that are read; otherwise the
// whole history is.
func (s *Store) current(ctx context.Context, jobID string) (State, error) {
	return s.currentWith(ctx, s.anyReplica, jobID)
}

func (s *Store) currentWith(ctx context.Context, get getter, jobID string) (State, error) {
	if !validJobID(jobID) {
		return State{}, fmt.Errorf("%w: job id %q", ErrBadEvent, jobID)
	}
	last, found, err := get(ctx, map[string]any{"last_by_subj": JobFilter(jobID)})
	if err != nil || !found {
		return State{JobID: jobID}, err
	}
	if cached, ok := s.cache.get(jobID); ok && cached.LastSeq <= last.Seq {
		if cached.LastSeq == last.Seq {
			return cached, nil
		}
		if newer, ok, err := s.walkWith(ctx, get, last, cached.LastSeq); err != nil {
			return State{}, err
		} else if ok {
			return s.fold(cached, newer)
		}
	}
	evs, ok, err := s.walkWith(ctx, get, last, 0)
	if err != nil {
		return State{}, err
	}
	if !ok {
		h, err := s.scanJob(ctx, jobID)
		if err != nil {
			return State{}, err
		}
		evs = h.Events
	}
	return s.fold(State{}, evs)
}

func (s *Store) fold(from State, evs []Event) (State, error) {
	st := from
	for _, e := range evs {
		var err error
		if st, err = Apply(st, e); err != nil {
			return st, fmt.Errorf("folding job %s: %w", e.JobID, err)
		}
	}
	s.cache.put(st)
	return st, nil
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
	seq, _, err := s.append(ctx, expect, prevHash, e)
	return seq, err
}

// append is Append that also returns the chain hash of the body it stored.
func (s *Store) append(ctx context.Context, expect uint64, prevHash string, e Event) (uint64, string, error) {
	if e.Source == "" {
		e.Source = s.source
	}
	e.PrevHash, e.PrevSeq = prevHash, expect
	body, err := s.seal(&e)
	if err != nil {
		return 0, "", err
	}
	msg := &nats.Msg{Subject: e.subject(), Data: body, Header: nats.Header{}}
	piped := s.piped()
	var opts []jetstream.PublishOpt
	if piped {
		msg.Header[jetstream.MsgIDHeader] = []string{e.ID}
		msg.Header[jetstream.ExpectedLastSubjSeqHeader] = []string{strconv.FormatUint(expect, 10)}
		msg.Header[jetstream.ExpectedLastSubjSeqSubjHeader] = []string{JobFilter(e.JobID)}
	} else {
		opts = []jetstream.PublishOpt{jetstream.WithMsgID(e.ID),
			jetstream.WithExpectLastSequenceForSubject(expect, JobFilter(e.JobID))}
	}
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		pctx, cancel := context.WithTimeout(ctx, s.timeout)
		var seq uint64
		var err error
		if piped {
			seq, err = s.publishPiped(pctx, msg)
		} else {
			var ack *jetstream.PubAck
			if ack, err = s.js.PublishMsg(pctx, msg, opts...); err == nil {
				seq = ack.Sequence
			}
		}
		cancel()
		if err == nil {
			return seq, HashOf(body), nil
		}
		lastErr = err
		if !isConflict(err) && !isTimeout(err) {
			return 0, "", fmt.Errorf("appending %s to job %s: %w", e.Name, e.JobID, err)
		}
		seq, landed, lerr := s.landed(ctx, e)
		if lerr == nil && landed {
			return seq, HashOf(body), nil
		}
		if isConflict(err) && lerr == nil {
			return 0, "", fmt.Errorf("appending %s to job %s at %d: %w", e.Name, e.JobID, expect, ErrConflict)
		}
		if ctx.Err() != nil {
			return 0, "", ctx.Err()
		}
	}
	return 0, "", fmt.Errorf("appending %s to job %s: %w", e.Name, e.JobID, lastErr)
}

// seal signs a complete event with the store's key, when it has one, and encodes it: the
// one place an event's body is made for the log. Events of this process that are ready
// to be signed with the same key at the same moment share one batch signature; a lone
// event is signed at once, alone (groupsign.go).
func (s *Store) seal(e *Event) ([]byte, error) {
	if s.key != nil {
		s.key.signShared(e)
	}
	return e.Encode()
}

// landed reads the job's last message and reports whether it is the given event.
func (s *Store) landed(ctx context.Context, e Event) (uint64, bool, error) {
	last, found, err := s.directGet(ctx, map[string]any{"last_by_subj": JobFilter(e.JobID)})
	if err != nil || !found {
		return 0, false, err
	}
	return last.Seq, last.ID == e.ID, nil
}

// Decision is what a service wants appended after seeing a job's state; nil or empty
// means nothing to do (the work is already recorded).
type Decision func(State) ([]Event, error)

// Decide loads a job, folds it, asks decide what to append, and appends it conditionally.
// On a conflict it reloads and asks again, a bounded number of times. It returns the
// state after the appended events.
func (s *Store) Decide(ctx context.Context, jobID string, decide Decision) (State, error) {
	return s.decideAtLeast(ctx, jobID, 0, decide)
}

// decideAtLeast is Decide on a state that includes at least stream sequence min: a
// decision is never made on a read older than what the caller already knows of the job.
// After a conflict the log holds something newer than the state that lost, so the next
// read must include it too.
func (s *Store) decideAtLeast(ctx context.Context, jobID string, need uint64, decide Decision) (State, error) {
	for attempt := 0; attempt <= s.retries; attempt++ {
		st, err := s.stateAtLeast(ctx, jobID, need)
		if err != nil {
			return st, err
		}
		next, err := s.decideOnce(ctx, st, decide)
		if errors.Is(err, ErrConflict) {
			need = max(need, st.LastSeq+1)
			continue
		}
		return next, err
	}
	return State{}, fmt.Errorf("job %s: %w", jobID, ErrTooManyConflicts)
}

// StateAt returns the job's state including at least event e, which the caller has just
// consumed. When the cache holds the job as of e, or as of the event just before e, no
// request is made; otherwise the job is read as State does.
func (s *Store) StateAt(ctx context.Context, e Event) (State, error) {
	if cached, ok := s.cache.get(e.JobID); ok && e.Seq != 0 {
		switch {
		case cached.LastSeq >= e.Seq:
			return cached, nil
		case e.PrevSeq != 0 && cached.LastSeq == e.PrevSeq:
			if st, err := Apply(cached, e); err == nil {
				s.cache.put(st)
				return st, nil
			}
		}
	}
	st, err := s.stateAtLeast(ctx, e.JobID, e.Seq)
	if err == nil && st.Status == StatusNone {
		return st, fmt.Errorf("%w: %s", ErrNotFound, e.JobID)
	}
	return st, err
}

// DecideOn is Decide in reaction to a consumed event: it starts from StateAt(e), so on
// the usual path it reads nothing, and never from a state older than e. A start that is
// behind the log shows up as a conflict on append, and the decision is then made again
// on a read that includes the event that won.
func (s *Store) DecideOn(ctx context.Context, e Event, decide Decision) (State, error) {
	st, err := s.StateAt(ctx, e)
	if err != nil {
		return st, err
	}
	return s.DecideFrom(ctx, st, decide)
}

// DecideFrom is Decide starting from a state the caller already folded (for instance the
// one the consumed event produced). A conflict falls back to loading.
func (s *Store) DecideFrom(ctx context.Context, st State, decide Decision) (State, error) {
	next, err := s.decideOnce(ctx, st, decide)
	if errors.Is(err, ErrConflict) {
		return s.decideAtLeast(ctx, st.JobID, st.LastSeq+1, decide)
	}
	return next, err
}

// DecideLatest is Decide for a caller that learned something from outside the log (a
// probe, a finished transfer) about a job this process has folded before: it decides on
// the cached state without reading, and lets the conditional append catch a cache that
// is behind the log (a conflict: decided again on a fresh read). A stale state can also
// hide work rather than conflict, so a decision of nothing, or one the cached state
// refuses, is made again on a fresh read (never older than the cached state) before it
// is believed. Without a cached state it is Decide.
func (s *Store) DecideLatest(ctx context.Context, jobID string, decide Decision) (State, error) {
	var need uint64
	if cached, ok := s.cache.get(jobID); ok {
		need = cached.LastSeq
		next, err := s.decideOnce(ctx, cached, decide)
		if err == nil && next.LastSeq != cached.LastSeq {
			return next, nil
		}
		if err != nil && !errors.Is(err, ErrConflict) && !errors.Is(err, ErrIllegalTransition) {
			return next, err
		}
	}
	return s.decideAtLeast(ctx, jobID, need, decide)
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
		e.PrevHash, e.PrevSeq = st.LastHash, st.LastSeq
		if s.key != nil {
			if err := s.key.grant.May(e, st); err != nil {
				return st, fmt.Errorf("appending %s to job %s: %w", e.Name, e.JobID, err)
			}
		}
		// Fold before appending: an illegal event is refused without touching the log.
		next, err := Apply(st, e)
		if err != nil {
			return st, err
		}
		seq, hash, err := s.append(ctx, st.LastSeq, st.LastHash, e)
		if err != nil {
			return st, err
		}
		// The stream's sequence and the stored body's hash are all Apply takes from an
		// event's stored form (it sets them last, after the step): set them rather than
		// fold (and decode the payload) a second time.
		next.LastSeq, next.LastHash = seq, hash
		st = next
		s.cache.put(st)
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
		e, err := decodeDirect(m)
		if err != nil {
			return nil, false, err
		}
		out = append(out, e)
	}
}

// decodeDirect decodes a message of a direct get, with the sequence and subject from its
// headers.
func decodeDirect(m *nats.Msg) (Event, error) {
	e, err := Decode(m.Data)
	if err != nil {
		return Event{}, fmt.Errorf("stored message %s: %w", m.Header.Get("Nats-Sequence"), err)
	}
	e.Subject = m.Header.Get("Nats-Subject")
	e.Seq, _ = strconv.ParseUint(m.Header.Get("Nats-Sequence"), 10, 64)
	if route := RouteOfSubject(e.Subject); route != NoRoute {
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

// Transient reports whether err is a timeout or a server that did not answer (one
// restarting, say): the call is worth trying again.
func Transient(err error) bool { return isTimeout(err) }

func isTimeout(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) ||
		errors.Is(err, jetstream.ErrNoStreamResponse) || isNoResponders(err)
}

func isNoResponders(err error) bool {
	return errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrNoStreamResponse)
}
