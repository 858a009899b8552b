package ptp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/pkg/bus"
	"github.com/gridwire/gridwire/pkg/cluster"
	"github.com/nats-io/nats.go/jetstream"
)

// PTP's job and process states (JobAttributes.State, ProcessAttributes.State): the only
// values PTP 5's client accepts.
const (
	StateStarting  = "STARTING"
	StateRunning   = "RUNNING"
	StateSuspended = "SUSPENDED"
	StateCompleted = "COMPLETED"
)

// UnplacedQueue holds jobs that ended before any cluster took them (no cluster matched,
// or they were cancelled first): PTP puts every job in a queue.
const UnplacedQueue = "(unplaced)"

// jobState maps a canonical state onto PTP's four.
func jobState(s events.Status) string {
	switch s {
	case events.StatusRunning, events.StatusStagingOut:
		return StateRunning
	case events.StatusHeld:
		return StateSuspended
	case events.StatusSucceeded, events.StatusFailed, events.StatusCancelled:
		return StateCompleted
	}
	return StateStarting
}

// procState is the state of a job's processes: they end when the program exits, before
// the job's files are staged out.
func procState(v *jobView) string {
	if v.ExitCode != nil || v.Ended {
		return StateCompleted
	}
	return jobState(v.Status)
}

// jobView is what PTP sees of one job.
type jobView struct {
	JobID    string
	Offset   uint32 // element ID offset of the job; its processes follow it
	Procs    int
	Name     string
	Cluster  string
	Queue    string
	Status   events.Status
	Native   string
	Reason   string
	Host     string
	ExitCode *int
	Ended    bool
}

// same reports whether a client would see no difference between two views.
func (v *jobView) same(w *jobView) bool {
	return v.Status == w.Status && v.Native == w.Native && v.Reason == w.Reason && v.Host == w.Host &&
		v.Ended == w.Ended && v.Cluster == w.Cluster && v.Queue == w.Queue &&
		(v.ExitCode == nil) == (w.ExitCode == nil) && (v.ExitCode == nil || *v.ExitCode == *w.ExitCode)
}

// change is one step of the model, numbered in the order the log gave it.
type change struct {
	N    uint64
	View jobView
	New  bool
}

// Model follows the log and keeps PTP's view of every job, plus the numbered changes
// sessions replay from their cursor. One Model serves every session of a process.
type Model struct {
	js       jetstream.JetStream
	ids      *ids
	clusters []cluster.Cluster
	log      *slog.Logger
	// MaxChanges bounds the changes kept for sessions that fall behind.
	maxChanges int

	mu      sync.Mutex
	states  map[string]kept
	scratch events.Job // the job of the state being folded (fold runs on one goroutine)
	views   map[string]*jobView
	byOff   map[uint32]string // job offset → job ID
	changes []change
	first   uint64 // N of changes[0]
	next    uint64 // N the next change gets
	wake    chan struct{}
	ready   chan struct{}
	folded  uint64
	failure error
}

func newModel(js jetstream.JetStream, ids *ids, clusters []cluster.Cluster, log *slog.Logger, maxChanges int) *Model {
	return &Model{js: js, ids: ids, clusters: clusters, log: log, maxChanges: maxChanges,
		states: map[string]kept{}, views: map[string]*jobView{}, byOff: map[uint32]string{},
		next: 1, first: 1, wake: make(chan struct{}), ready: make(chan struct{})}
}

// run folds the log from its start until ctx ends; a broken consumer is started again
// from the last event folded.
func (m *Model) run(ctx context.Context) error {
	for {
		err := m.follow(ctx)
		if ctx.Err() != nil {
			return nil
		}
		m.log.Warn("ptp model: following the log failed; resuming", "seq", m.folded, "err", err)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Second):
		}
	}
}

func (m *Model) follow(ctx context.Context) error {
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: []string{events.SubjectAll}}
	if m.folded > 0 {
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, m.folded+1
	}
	cons, err := m.js.OrderedConsumer(ctx, events.Stream, cfg)
	if err != nil {
		return fmt.Errorf("ptp model consumer: %w", err)
	}
	defer bus.Forget(ctx, bus.OfStream(m.js, events.Stream), cons)
	if info := cons.CachedInfo(); info == nil || info.NumPending == 0 {
		m.markReady()
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(1024))
	if err != nil {
		return fmt.Errorf("ptp model consumer: %w", err)
	}
	stop := context.AfterFunc(ctx, it.Stop)
	defer stop()
	defer it.Stop()
	for {
		msg, err := it.Next()
		if err != nil {
			return err
		}
		meta, err := msg.Metadata()
		if err != nil {
			continue
		}
		if err := m.fold(ctx, msg, meta.Sequence.Stream); err != nil {
			return err
		}
		if meta.NumPending == 0 {
			m.markReady()
		}
	}
}

func (m *Model) markReady() {
	select {
	case <-m.ready:
	default:
		close(m.ready)
	}
}

// Ready is closed once the model has caught up with the log as it was at start.
func (m *Model) Ready() <-chan struct{} { return m.ready }

// fold folds one event. An error (the ID bucket unreachable) leaves the event unfolded,
// so following resumes with it.
func (m *Model) fold(ctx context.Context, msg jetstream.Msg, seq uint64) error {
	e, err := events.DecodeStored(msg.Data(), msg.Subject(), seq)
	if err != nil {
		m.log.Warn("ptp model: undecodable event left out", "seq", seq, "err", err)
		m.folded = seq
		return nil
	}
	m.mu.Lock()
	prev, old := m.states[e.JobID], m.views[e.JobID]
	m.mu.Unlock()
	st, err := events.Apply(prev.state(&m.scratch), e)
	if err != nil {
		m.folded = seq // the fold refuses what the store would never have accepted
		return nil
	}
	if v, ok := viewOf(st); ok {
		if err := m.update(ctx, v, old); err != nil {
			return err
		}
	}
	m.mu.Lock()
	m.states[e.JobID] = keep(st)
	m.mu.Unlock()
	m.folded = seq
	return nil
}

// kept is a job's state as the model keeps it between the job's events: what the fold
// reads and viewOf shows. The model follows every job of the log, and a whole state holds
// the job's description and every rendered script, kilobytes a job: at a million jobs,
// gigabytes. Of a job it keeps the four fields the fold and the view read, not a
// 944-byte events.Job; a parent record keeps its job (its fold reads its children),
// without the document.
type kept struct {
	st     events.State // no rendered scripts or transfers; Job nil unless a parent's
	hasJob bool         // st.Job is nil and job holds the job's fields
	job    struct {
		name            string
		kind            events.Kind
		count, restarts int
	}
}

// keep reduces a folded state to what the model keeps.
func keep(st events.State) kept {
	st.Incarnation, st.Transfers, st.LastHash = nil, nil, ""
	if so := st.StagedOut; so != nil { // the fold reads only whether it succeeded
		st.StagedOut = stagedOut[so.OK]
	}
	if dd := st.DirectoryDeleted; dd != nil { // and only that this happened
		st.DirectoryDeleted = dirDeleted[dd.OK]
	}
	var k kept
	switch j := st.Job; {
	case j == nil:
	case j.Kind != events.KindGroup:
		k.hasJob = true
		k.job.name, k.job.kind, k.job.count, k.job.restarts = j.Name, j.Kind, j.Count, j.Restarts
		st.Job = nil
	case len(j.Original.Bytes) > 0: // the model never shows the document
		g := *j
		g.Original.Bytes = nil
		st.Job = &g
	}
	k.st = st
	return k
}

// state is the kept state as a state to fold into or view, its job (unless a parent's)
// written into job.
func (k kept) state(job *events.Job) events.State {
	st := k.st
	if k.hasJob {
		*job = events.Job{ID: st.JobID, Name: k.job.name, Kind: k.job.kind, Count: k.job.count, Restarts: k.job.restarts}
		st.Job = job
	}
	return st
}

// The stage-outs and directory removals lean states share (the fold never writes
// through them).
var (
	stagedOut  = map[bool]*events.StagedOutData{false: {OK: false}, true: {OK: true}}
	dirDeleted = map[bool]*events.DirectoryDeletedData{false: {OK: false}, true: {OK: true}}
)

// update publishes a job's new view when PTP would see a difference.
func (m *Model) update(ctx context.Context, v jobView, old *jobView) error {
	if old == nil {
		off, err := m.ids.job(ctx, v.JobID, v.Procs)
		if err != nil {
			return err
		}
		v.Offset = off
		m.publish(v, true)
		return nil
	}
	v.Offset, v.Procs = old.Offset, old.Procs
	if v.Queue != old.Queue || v.Cluster != old.Cluster { // PTP cannot move a job
		v.Queue, v.Cluster = old.Queue, old.Cluster
	}
	if !old.same(&v) {
		m.publish(v, false)
	}
	return nil
}

// viewOf is PTP's view of a job's state; false while PTP should not see it yet (no
// cluster chosen and not ended) or never (a group's parent record).
func viewOf(st events.State) (jobView, bool) {
	if st.Job == nil || st.Job.Kind == events.KindGroup {
		return jobView{}, false
	}
	v := jobView{JobID: st.JobID, Name: st.Job.Name, Cluster: st.Cluster, Queue: st.Queue, Status: st.Status,
		Native: st.NativeState, Reason: st.Reason, Host: st.Host, Ended: st.Status.Terminal(), Procs: max(st.Job.Count, 1)}
	if st.ExitCode != nil {
		c := *st.ExitCode
		v.ExitCode = &c
	}
	if v.Name == "" {
		v.Name = st.JobID
	}
	if v.Cluster == "" {
		if !v.Ended {
			return v, false
		}
		v.Queue = UnplacedQueue
	}
	return v, true
}

func (m *Model) publish(v jobView, isNew bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.views[v.JobID] = &v
	m.byOff[v.Offset] = v.JobID
	m.changes = append(m.changes, change{N: m.next, View: v, New: isNew})
	m.next++
	if over := len(m.changes) - m.maxChanges; over > 0 {
		m.changes = append(m.changes[:0], m.changes[over:]...)
		m.first += uint64(over)
	}
	close(m.wake)
	m.wake = make(chan struct{})
}

// errBehind is returned to a session whose cursor fell out of the kept changes.
var errBehind = errors.New("ptp: session fell too far behind the log")

// since returns the changes from cursor on, the next cursor, and a channel closed when
// more arrive.
func (m *Model) since(cursor uint64, max int) ([]change, uint64, <-chan struct{}, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if cursor < m.first {
		return nil, cursor, nil, errBehind
	}
	from := int(cursor - m.first)
	to := min(len(m.changes), from+max)
	out := append([]change(nil), m.changes[from:to]...)
	return out, cursor + uint64(to-from), m.wake, nil
}

// snapshot returns every job's view, by offset, and the cursor after them.
func (m *Model) snapshot() ([]jobView, uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]jobView, 0, len(m.views))
	for _, v := range m.views {
		out = append(out, *v)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Offset < out[j].Offset })
	return out, m.next
}

// jobAt is the job whose element offset is off.
func (m *Model) jobAt(off uint32) (jobView, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	id, ok := m.byOff[off]
	if !ok {
		return jobView{}, false
	}
	return *m.views[id], true
}
