package readside

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/pkg/bus"
	"github.com/nats-io/nats.go/jetstream"
)

// projector keeps the job table projection in KV up to date with the log. It folds every
// event into its table and, every flush interval, writes the rows that are due, then the
// stamp. Several read-side processes may run one each: they write the same rows.
//
// A row is due when its job has ended, or when its oldest unwritten change is one hold
// (ten flush intervals) old: a job moving through the pipeline changes its row with each
// of its events, a few milliseconds apart, and writing each of those states cost a KV
// write per event (3.5-4 a fork job in gridwire bench). The table in memory, which the
// read API serves, is current either way; the bucket is what a restart resumes from, so
// the stamp written never passes the first unwritten event of a row still held back, and
// a restart folds those events again (a row skips what it has folded already).
type projector struct {
	js    jetstream.JetStream
	kv    jetstream.KeyValue
	table *Table
	log   *slog.Logger
	every time.Duration
	hold  time.Duration
	now   func() time.Time
	dirty map[string]unwritten
	// revs holds the bucket revision of each row as this projector last saw it (read at
	// start, acknowledged since): every row write expects it (see writeRows).
	revs    revisions
	folded  uint64 // stream sequence of the last event folded
	written uint64 // the stamp last written
	// metrics, when set, observe each new event's append latency.
	metrics *metrics
}

// unwritten is a row folded since it was last written.
type unwritten struct {
	first uint64    // stream sequence of its oldest event not in the bucket
	since time.Time // when that event was folded
	ended bool      // its last event was a terminal one: the row is due
}

// holdIntervals is how many flush intervals a changing row may wait to be written.
const holdIntervals = 10

// runProjector maintains the projection in bucket until ctx ends, folding into table
// (nil: a table of its own), which the process's read API may serve: then it holds one
// copy of the job table, not a second one mirrored from the bucket.
//
// A failure (the server restarting, a write that times out) does not stop the read side:
// the projector starts again from what its bucket holds, after a back-off, because a
// projection can always be rebuilt from its stamp and the log. The rows it folded and
// had not written yet stay marked, so the next start writes them.
func runProjector(ctx context.Context, js jetstream.JetStream, bucket string, every time.Duration, log *slog.Logger, m *metrics, table *Table) error {
	if table == nil {
		table = NewTable()
	}
	dirty := map[string]unwritten{}
	wait := 250 * time.Millisecond
	for {
		err := project(ctx, js, bucket, every, log, m, table, dirty)
		if ctx.Err() != nil {
			return nil
		}
		log.Warn("projector stopped; starting again", "projection", bucket, "in", wait, "err", err)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
		wait = min(wait*2, 5*time.Second)
	}
}

func project(ctx context.Context, js jetstream.JetStream, bucket string, every time.Duration, log *slog.Logger, m *metrics, table *Table, dirty map[string]unwritten) error {
	kv, err := projectionBucket(ctx, js, bucket)
	if err != nil {
		return err
	}
	p := &projector{js: js, kv: kv, log: log.With("projection", bucket), every: every, hold: holdIntervals * every, now: time.Now,
		dirty: dirty, revs: revisions{}, metrics: m, table: table}
	if p.folded, err = loadInto(ctx, kv, table, p.revs); err != nil {
		return err
	}
	p.written = p.folded
	return p.run(ctx)
}

// loadProjection reads a projection bucket into a table and returns the stamp it holds.
func loadProjection(ctx context.Context, kv jetstream.KeyValue) (*Table, uint64, error) {
	t := NewTable()
	stamp, err := loadInto(ctx, kv, t, nil)
	if err != nil {
		return nil, 0, err
	}
	return t, stamp, nil
}

// loadInto reads a projection bucket into t (rows only move forward: a row t holds at a
// later stamp stays) and returns the stamp the bucket holds. revs, when not nil, receives
// the revision of every row read.
func loadInto(ctx context.Context, kv jetstream.KeyValue, t *Table, revs revisions) (uint64, error) {
	var stamp uint64
	w, err := kv.WatchAll(ctx, jetstream.IgnoreDeletes())
	if err != nil {
		return 0, fmt.Errorf("reading projection %s: %w", kv.Bucket(), err)
	}
	defer w.Stop()
	for entry := range w.Updates() {
		if entry == nil {
			break
		}
		seq, err := t.setEntry(entry)
		if err != nil {
			return 0, fmt.Errorf("reading projection %s: %w", kv.Bucket(), err)
		}
		stamp = max(stamp, seq)
		if id := jobOfKey(entry.Key()); revs != nil && id != "" {
			revs[id] = entry.Revision()
		}
	}
	return stamp, nil
}

// setEntry puts one KV entry of a projection into the table: a row, or the stamp
// (whose sequence it returns).
func (t *Table) setEntry(entry jetstream.KeyValueEntry) (uint64, error) {
	if entry.Key() == MetaKey {
		var m Meta
		if err := json.Unmarshal(entry.Value(), &m); err != nil {
			return 0, fmt.Errorf("key %s: %w", MetaKey, err)
		}
		t.SetSeq(m.Seq)
		return m.Seq, nil
	}
	if jobOfKey(entry.Key()) == "" {
		return 0, nil
	}
	var r Row
	if err := json.Unmarshal(entry.Value(), &r); err != nil {
		return 0, fmt.Errorf("key %s: %w", entry.Key(), err)
	}
	t.Set(r)
	return 0, nil
}

// run folds the log into the projection until ctx ends. A consumer that stops or a
// write that fails (the server restarting, say) is retried from what was folded: the
// projection falls behind for a while, it never stops the read side.
func (p *projector) run(ctx context.Context) error {
	for {
		err := p.consume(ctx)
		if ctx.Err() != nil {
			// A last flush with a context of its own; if it cannot be written, the next
			// start folds those events again from the stamp.
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			if err := p.flush(fctx, true); err != nil {
				p.log.Warn("projection: last flush failed", "seq", p.folded, "err", err)
			}
			return nil
		}
		p.log.Warn("projection interrupted; resuming", "seq", p.folded, "err", err)
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

// consume folds events from the one after the last folded until ctx ends or reading or
// writing fails.
func (p *projector) consume(ctx context.Context) error {
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: []string{events.SubjectAll}}
	if p.folded > 0 {
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, p.folded+1
	}
	cons, err := p.js.OrderedConsumer(ctx, events.Stream, cfg)
	if err != nil {
		return fmt.Errorf("projection consumer: %w", err)
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(1024))
	if err != nil {
		return fmt.Errorf("projection consumer: %w", err)
	}
	msgs, drain := bus.Feed(it, 1024)
	defer drain()
	return p.loop(ctx, msgs)
}

func (p *projector) loop(ctx context.Context, msgs <-chan jetstream.Msg) error {
	tick := time.NewTicker(p.every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case m, ok := <-msgs:
			if !ok {
				return errors.New("projection consumer stopped")
			}
			p.fold(m)
			if len(p.dirty) >= 4096 {
				if err := p.flush(ctx, true); err != nil {
					return err
				}
			}
		case <-tick.C:
			if err := p.flush(ctx, false); err != nil {
				return err
			}
		}
	}
}

func (p *projector) fold(m jetstream.Msg) {
	meta, err := m.Metadata()
	if err != nil {
		p.log.Warn("stream message without metadata", "err", err)
		return
	}
	e, err := events.DecodeStored(m.Data(), m.Subject(), meta.Sequence.Stream)
	if err == nil {
		p.metrics.observeAppend(e, meta.Timestamp)
	}
	p.foldEvent(e, err)
}

// foldEvent folds one decoded event (err: it could not be decoded) into the table.
func (p *projector) foldEvent(e events.Event, err error) {
	if err == nil {
		var changed bool
		if changed, err = p.table.Apply(e); changed {
			u, held := p.dirty[e.JobID]
			if !held {
				u = unwritten{first: e.Seq, since: p.now()}
			}
			u.ended = e.Name.Terminal()
			p.dirty[e.JobID] = u
		}
	}
	if err != nil {
		p.log.Warn("event left out of the projection", "seq", e.Seq, "job", e.JobID, "event", e.Name, "err", err)
	}
	p.folded = max(p.folded, e.Seq)
	p.table.SetSeq(p.folded)
}

// flush writes the rows that are due (all: every row folded and not written), then the
// stamp: the last event folded, or, while rows are held back, the event before the
// oldest one a held row has not written.
func (p *projector) flush(ctx context.Context, all bool) error {
	if p.folded == p.written && len(p.dirty) == 0 {
		return nil
	}
	now := p.now()
	stamp := p.folded
	rows := make([]Row, 0, len(p.dirty))
	for id, u := range p.dirty {
		if !all && !u.ended && now.Sub(u.since) < p.hold {
			stamp = min(stamp, u.first-1)
			continue
		}
		if r, ok := p.table.Row(id); ok {
			rows = append(rows, r)
		} else {
			delete(p.dirty, id)
		}
	}
	if len(rows) == 0 && stamp <= p.written {
		return nil
	}
	meta := p.table.Meta()
	meta.Seq = max(stamp, p.written)
	if err := writeProjection(ctx, p.js, p.kv, rows, meta, p.revs); err != nil {
		return err
	}
	for _, r := range rows {
		delete(p.dirty, r.JobID)
	}
	p.written = meta.Seq
	return nil
}
