package readside

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/pkg/bus"
	"github.com/nats-io/nats.go/jetstream"
)

// Break is the first broken link of one job's history.
type Break struct {
	Job     string      `json:"job"`
	Seq     uint64      `json:"seq"`                // stream sequence of the offending event
	EventID string      `json:"event_id,omitempty"` // its CloudEvents id, when it decodes
	Event   events.Name `json:"event,omitempty"`
	Problem string      `json:"problem"`
}

func (b Break) String() string {
	return fmt.Sprintf("job %s: seq %d (%s %s): %s", b.Job, b.Seq, b.Event, b.EventID, b.Problem)
}

// AuditReport is the result of verifying histories.
type AuditReport struct {
	Jobs   int     `json:"jobs"`
	Events uint64  `json:"events"`
	Seq    uint64  `json:"seq"`    // last stream sequence read
	Broken []Break `json:"broken"` // one per job with a broken history, in job order
	// SignedFrom is the stream sequence of the log's first signed event (0: none yet);
	// Unsigned counts the events read that were stored before it, written before gridwire
	// signed its events. An unsigned event after SignedFrom breaks its history.
	SignedFrom uint64 `json:"signed_from"`
	Unsigned   uint64 `json:"unsigned"`
}

// OK reports whether every history verified.
func (r AuditReport) OK() bool { return len(r.Broken) == 0 }

// chainState is what the audit knows of one job so far.
type chainState struct {
	lastSeq  uint64
	lastHash string
	state    events.State
	broken   bool
}

// Audit verifies job histories in the log: each event must decode, be stored under its
// own job's and type's subject, link to the job's previous event by prevseq and by
// prevhash (the SHA-256 of that event's stored body), carry a signature that holds for a
// key of ring whose role may write it (events.Keyring.Verify), and be accepted by the
// fold. Events stored before the log's first signed event are counted as unsigned, not
// broken (logs written before gridwire signed); an unsigned event after it is broken. It
// reports the first broken link of each job. jobID "" verifies every job.
func Audit(ctx context.Context, js jetstream.JetStream, jobID string, ring *events.Keyring) (AuditReport, error) {
	stream, err := js.Stream(ctx, events.Stream)
	if err != nil {
		return AuditReport{}, fmt.Errorf("audit: %w", err)
	}
	last := stream.CachedInfo().State.LastSeq
	filter := events.SubjectAll
	if jobID != "" {
		filter = events.JobFilter(jobID)
	}
	rep := AuditReport{Seq: last, Broken: []Break{}}
	if rep.SignedFrom, err = firstSigned(ctx, stream, last); err != nil {
		return rep, err
	}
	if ring == nil {
		ring = &events.Keyring{}
	}
	jobs := map[string]*chainState{}
	err = readFiltered(ctx, stream, filter, last, func(m jetstream.Msg, seq uint64) {
		rep.Events++
		auditOne(jobs, m, seq, ring, &rep)
	})
	if err != nil {
		return rep, err
	}
	rep.Jobs = len(jobs)
	slices.SortFunc(rep.Broken, func(a, b Break) int { return cmpString(a.Job, b.Job) })
	return rep, nil
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// firstSigned is the sequence of the log's first signed event, 0 when none is stored up
// to last. It reads from the start until it finds one: on a log gridwire always signed,
// that is its first message.
func firstSigned(ctx context.Context, stream jetstream.Stream, last uint64) (uint64, error) {
	var found uint64
	err := readUntil(ctx, stream, last, func(m jetstream.Msg, seq uint64) bool {
		if e, err := events.Decode(m.Data()); err == nil && e.Signer != "" {
			found = seq
			return false
		}
		return true
	})
	return found, err
}

// auditOne checks one stored message against its job's chain.
func auditOne(jobs map[string]*chainState, m jetstream.Msg, seq uint64, ring *events.Keyring, rep *AuditReport) {
	subjJob, subjName, _, perr := events.ParseSubject(m.Subject())
	e, derr := events.Decode(m.Data())
	job := subjJob // the history it is stored in is the one it bends
	if perr != nil {
		job = e.JobID
	}
	c := jobs[job]
	if c == nil {
		c = &chainState{}
		jobs[job] = c
	}
	if c.broken {
		return
	}
	fail := func(problem string) {
		c.broken = true
		rep.Broken = append(rep.Broken, Break{Job: job, Seq: seq, EventID: e.ID, Event: e.Name, Problem: problem})
	}
	switch {
	case perr != nil:
		fail("stored under a malformed subject " + m.Subject())
	case derr != nil:
		fail("the stored body does not decode: " + derr.Error())
	case subjJob != e.JobID || subjName != e.Name:
		fail(fmt.Sprintf("stored under %s but the body says job %s, %s", m.Subject(), e.JobID, e.Name))
	case e.PrevSeq != c.lastSeq:
		fail(fmt.Sprintf("prevseq is %d but the job's previous event is at %d", e.PrevSeq, c.lastSeq))
	case e.PrevHash != c.lastHash:
		fail(fmt.Sprintf("prevhash %s does not match the hash %s of the job's previous stored event", short(e.PrevHash), short(c.lastHash)))
	default:
		e.Seq, e.Subject = seq, m.Subject()
		if problem := signatureProblem(ring, m, seq, c.state, rep); problem != "" {
			fail(problem)
			return
		}
		next, err := events.Apply(c.state, e)
		if err != nil {
			fail("the fold refuses it: " + err.Error())
			return
		}
		c.state, c.lastSeq, c.lastHash = next, seq, e.Hash
	}
}

// signatureProblem says what is wrong with a stored event's signature, "" when nothing
// is: it holds for a trusted key whose role may write the event, or the event was stored
// before the log's first signed one (then it is counted).
func signatureProblem(ring *events.Keyring, m jetstream.Msg, seq uint64, st events.State, rep *AuditReport) string {
	route := events.RouteOfSubject(m.Subject())
	if route == events.NoRoute {
		route = ""
	}
	_, err := ring.Verify(m.Data(), route, st)
	switch {
	case err == nil:
		return ""
	case errors.Is(err, events.ErrUnsigned) && (rep.SignedFrom == 0 || seq < rep.SignedFrom):
		rep.Unsigned++
		return ""
	case errors.Is(err, events.ErrUnsigned):
		return fmt.Sprintf("unsigned, stored after the log's first signed event (seq %d)", rep.SignedFrom)
	}
	return err.Error()
}

func short(h string) string {
	if h == "" {
		return "(none)"
	}
	if len(h) > 12 {
		return h[:12] + "…"
	}
	return h
}

// readFiltered calls fn for each message of the stream matching filter, up to last.
func readFiltered(ctx context.Context, stream jetstream.Stream, filter string, last uint64, fn func(jetstream.Msg, uint64)) error {
	if last == 0 {
		return nil
	}
	info, err := stream.Info(ctx, jetstream.WithSubjectFilter(filter))
	if err != nil {
		return fmt.Errorf("audit: %w", err)
	}
	if len(info.State.Subjects) == 0 {
		return nil
	}
	cons, err := stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{filter}})
	if err != nil {
		return fmt.Errorf("audit: %w", err)
	}
	defer bus.Forget(ctx, stream, cons)
	it, err := cons.Messages(jetstream.PullMaxMessages(2048))
	if err != nil {
		return fmt.Errorf("audit: %w", err)
	}
	defer it.Stop()
	stop := context.AfterFunc(ctx, it.Stop)
	defer stop()
	lastOfFilter := lastMatching(ctx, stream, filter, last)
	for {
		m, err := it.Next()
		if err != nil {
			return fmt.Errorf("audit: reading the stream: %w", err)
		}
		seq := seqOf(m)
		fn(m, seq)
		if seq >= lastOfFilter {
			return nil
		}
	}
}

// readUntil calls fn for each message of the stream in order, up to last, while fn
// returns true.
func readUntil(ctx context.Context, stream jetstream.Stream, last uint64, fn func(jetstream.Msg, uint64) bool) error {
	if last == 0 {
		return nil
	}
	cons, err := stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{events.SubjectAll}})
	if err != nil {
		return fmt.Errorf("audit: %w", err)
	}
	defer bus.Forget(ctx, stream, cons)
	it, err := cons.Messages(jetstream.PullMaxMessages(256))
	if err != nil {
		return fmt.Errorf("audit: %w", err)
	}
	defer it.Stop()
	stop := context.AfterFunc(ctx, it.Stop)
	defer stop()
	for {
		m, err := it.Next()
		if err != nil {
			return fmt.Errorf("audit: reading the stream: %w", err)
		}
		seq := seqOf(m)
		if !fn(m, seq) || seq >= last {
			return nil
		}
	}
}

// lastMatching is the sequence of the last message matching filter at or before last.
func lastMatching(ctx context.Context, stream jetstream.Stream, filter string, last uint64) uint64 {
	if filter == events.SubjectAll {
		return last
	}
	m, err := stream.GetLastMsgForSubject(ctx, filter)
	if err != nil {
		return last
	}
	return min(m.Sequence, last)
}
