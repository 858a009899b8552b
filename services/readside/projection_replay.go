package readside

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"time"

	"github.com/gridwire/gridwire/events"
	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/sync/errgroup"
)

// RebuildOptions tune Rebuild.
type RebuildOptions struct {
	// Bucket receives the rebuilt projection; it is emptied first. Empty: build in
	// memory only.
	Bucket string
	// Shards fold jobs in parallel, each job always in the same shard (default GOMAXPROCS).
	Shards int
	// Progress is called now and then with the events folded and the events to fold.
	Progress func(done, total uint64)
	// Refused is called for each event the state machine does not accept (a history the
	// audit will flag); the event is left out, as the live projection leaves it out. The
	// event carries what a fold reads (see events.DecodeFold), its sequence and subject.
	Refused func(e events.Event, err error)
}

// RebuildResult says what a rebuild read.
type RebuildResult struct {
	Events   uint64        // events folded
	Refused  uint64        // events the fold refused
	Jobs     int           // jobs in the table
	Seq      uint64        // the last stream sequence folded
	Duration time.Duration // reading, folding and writing
}

// Rate is events folded per second.
func (r RebuildResult) Rate() float64 {
	if r.Duration <= 0 {
		return 0
	}
	return float64(r.Events) / r.Duration.Seconds()
}

// Rebuild folds the whole JOBS stream, from its first event to the last one stored when
// it starts, into a fresh job table, and writes it to opts.Bucket. It never touches the
// live projection unless opts.Bucket names it.
func Rebuild(ctx context.Context, js jetstream.JetStream, opts RebuildOptions) (*Table, RebuildResult, error) {
	start := time.Now()
	if opts.Shards <= 0 {
		opts.Shards = runtime.GOMAXPROCS(0)
	}
	stream, err := js.Stream(ctx, events.Stream)
	if err != nil {
		return nil, RebuildResult{}, fmt.Errorf("replay: %w", err)
	}
	info := stream.CachedInfo()
	res := RebuildResult{Seq: info.State.LastSeq}
	table, err := foldStream(ctx, stream, info.State.FirstSeq, info.State.LastSeq, opts, &res)
	if err != nil {
		return nil, res, err
	}
	res.Jobs = len(table.rows)
	if opts.Bucket != "" {
		kv, err := freshBucket(ctx, js, opts.Bucket)
		if err != nil {
			return nil, res, err
		}
		if err := writeProjection(ctx, js, kv, table.Rows(), table.Meta(), revisions{}); err != nil {
			return nil, res, err
		}
	}
	res.Duration = time.Since(start)
	return table, res, nil
}

// foldStream folds events first..last into one table, from shards folding in parallel.
// Nothing else holds the events or the rows: a replay of a million jobs holds one table
// and the batches in flight.
func foldStream(ctx context.Context, stream jetstream.Stream, first, last uint64, opts RebuildOptions, res *RebuildResult) (*Table, error) {
	table := NewTable()
	if last == 0 || last < first {
		return table, nil
	}
	shards := make([]*foldShard, opts.Shards)
	g, gctx := errgroup.WithContext(ctx)
	for i := range shards {
		shards[i] = &foldShard{rows: map[string]*foldingRow{}, in: make(chan []storedMsg, 4), refused: opts.Refused}
		g.Go(func() error { return shards[i].run(gctx) })
	}
	g.Go(func() error {
		defer func() {
			for _, s := range shards {
				close(s.in)
			}
		}()
		return readStream(gctx, stream, first, last, shards, opts.Progress)
	})
	if err := g.Wait(); err != nil {
		return nil, err
	}
	for _, s := range shards {
		res.Events += s.events
		res.Refused += s.refusedN
	}
	table.finishReplay(shards, last)
	return table, nil
}

// readStream delivers the stream's messages first..last to the shards in batches, each
// job's events to the same shard in stream order.
func readStream(ctx context.Context, stream jetstream.Stream, first, last uint64, shards []*foldShard, progress func(done, total uint64)) error {
	cons, err := stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{events.SubjectAll},
		DeliverPolicy:  jetstream.DeliverByStartSequencePolicy, OptStartSeq: first,
	})
	if err != nil {
		return fmt.Errorf("replay: %w", err)
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(4096))
	if err != nil {
		return fmt.Errorf("replay: %w", err)
	}
	defer it.Stop()
	stop := context.AfterFunc(ctx, it.Stop)
	defer stop()
	const batch = 512
	pending := make([][]storedMsg, len(shards))
	send := func(i int) error {
		select {
		case shards[i].in <- pending[i]:
			pending[i] = make([]storedMsg, 0, batch)
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	total := last - first + 1
	for done := uint64(0); ; {
		m, err := it.Next()
		if err != nil {
			return fmt.Errorf("replay: reading the stream: %w", err)
		}
		seq := streamSeqOf(m.Reply())
		if seq == 0 {
			return fmt.Errorf("replay: reading the stream: a delivery without a stream sequence (reply %q)", m.Reply())
		}
		i := shardOf(m.Subject(), len(shards))
		pending[i] = append(pending[i], storedMsg{data: m.Data(), subject: m.Subject(), seq: seq})
		if len(pending[i]) == batch {
			if err := send(i); err != nil {
				return err
			}
		}
		done++
		if progress != nil && (done%4096 == 0 || seq >= last) {
			progress(min(done, total), total)
		}
		if seq >= last {
			break
		}
	}
	for i := range pending {
		if len(pending[i]) > 0 {
			if err := send(i); err != nil {
				return err
			}
		}
	}
	return nil
}

func seqOf(m jetstream.Msg) uint64 {
	meta, err := m.Metadata()
	if err != nil {
		return 0
	}
	return meta.Sequence.Stream
}

// streamSeqOf is the stream sequence m.Metadata() reads from a JetStream delivery's
// reply subject, without building the rest of the metadata: $JS.ACK.<stream>.<consumer>.
// <delivered>.<sseq>..., or with the domain and account hash after ACK (eleven tokens or
// more); 0 when the subject is neither.
func streamSeqOf(reply string) uint64 {
	rest, ok := strings.CutPrefix(reply, "$JS.ACK.")
	if !ok {
		return 0
	}
	skip := 3 // stream, consumer, delivered
	switch n := strings.Count(reply, ".") + 1; {
	case n == 9:
	case n >= 11:
		skip = 5 // domain, account hash
	default:
		return 0
	}
	for range skip {
		_, rest, _ = strings.Cut(rest, ".")
	}
	tok, _, _ := strings.Cut(rest, ".")
	var seq uint64
	for i := 0; i < len(tok); i++ {
		if tok[i] < '0' || tok[i] > '9' {
			return 0
		}
		seq = seq*10 + uint64(tok[i]-'0')
	}
	return seq
}

// shardOf picks a job's shard from its subject, jobs.<id>.<event>.<route>: the FNV-1a
// hash of the job ID.
func shardOf(subject string, n int) int {
	id, ok := events.JobOfSubject(subject)
	if !ok {
		id = subject
	}
	h := uint32(2166136261)
	for i := 0; i < len(id); i++ {
		h = (h ^ uint32(id[i])) * 16777619
	}
	return int(h % uint32(n))
}

// storedMsg is one stream message as the fold needs it.
type storedMsg struct {
	data    []byte
	subject string
	seq     uint64
}

// foldShard folds its jobs' events into rows of its own: a replay's shards never share
// a job, so each folds its rows in place, with no lock, and hands them to the table at the
// end (Table.finishReplay).
type foldShard struct {
	rows     map[string]*foldingRow
	in       chan []storedMsg
	refused  func(events.Event, error)
	events   uint64
	refusedN uint64
	scratch  events.Job // the job each fold starts from (see foldingRow.fold)
}

func (s *foldShard) run(ctx context.Context) error {
	for msgs := range s.in {
		s.fold(msgs)
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	return nil
}

// fold decodes and folds a batch of messages.
func (s *foldShard) fold(msgs []storedMsg) {
	for i := range msgs {
		m := &msgs[i]
		e, checked, err := events.DecodeFoldJSON(m.data, m.subject, m.seq)
		if err == nil {
			s.events++
			err = s.apply(&e, checked)
		}
		if err != nil {
			s.refusedN++
			if s.refused != nil {
				s.refused(e, err)
			}
		}
	}
}

// apply folds one event into its job's row, as Table.Apply does: an event at or below
// the row's stamp is already folded, and a refused one leaves the row as it was. A new
// row keeps a job ID of its own: the event's may share the bytes of its stream subject
// (events.DecodeFold). checked says the decoder checked e's data as JSON.
func (s *foldShard) apply(e *events.Event, checked bool) error {
	r := s.rows[e.JobID]
	if r == nil {
		r = new(foldingRow)
		if err := r.fold(e, checked, &s.scratch); err != nil {
			return err
		}
		r.st.JobID = strings.Clone(r.st.JobID)
		s.rows[r.st.JobID] = r
		return nil
	}
	if e.Seq != 0 && e.Seq <= r.st.LastSeq {
		return nil
	}
	return r.fold(e, checked, &s.scratch)
}

// eventOf decodes a stream message with its sequence, subject and route.
func eventOf(m jetstream.Msg) (events.Event, error) {
	meta, err := m.Metadata()
	if err != nil {
		return events.Event{}, err
	}
	return events.DecodeStored(m.Data(), m.Subject(), meta.Sequence.Stream)
}

// projectionBucket opens (creating when needed) a projection bucket.
func projectionBucket(ctx context.Context, js jetstream.JetStream, name string) (jetstream.KeyValue, error) {
	kv, err := events.Ensure(ctx, func(ctx context.Context) (jetstream.KeyValue, error) {
		replicas, err := events.Replicas(ctx, js)
		if err != nil {
			return nil, err
		}
		return js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
			Bucket: name, Description: "gridwire job table projection, stamped with stream sequences",
			Storage: jetstream.FileStorage, Replicas: replicas,
		})
	})
	if err != nil {
		return nil, fmt.Errorf("projection bucket %s: %w", name, err)
	}
	return kv, nil
}

// freshBucket empties a projection bucket by recreating it.
func freshBucket(ctx context.Context, js jetstream.JetStream, name string) (jetstream.KeyValue, error) {
	if err := js.DeleteKeyValue(ctx, name); err != nil && !errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, fmt.Errorf("emptying projection bucket %s: %w", name, err)
	}
	return projectionBucket(ctx, js, name)
}

// writeProjection writes rows, then the stamp, to a projection bucket: the stamp lands
// only after every row it covers, so a reader never sees a stamp ahead of its rows.
// revs holds the revision of each row as the writer last saw it (empty for a fresh
// bucket); writeRows keeps it up to date.
func writeProjection(ctx context.Context, js jetstream.JetStream, kv jetstream.KeyValue, rows []Row, meta Meta, revs revisions) error {
	const window = 16384
	for len(rows) > 0 {
		n := min(window, len(rows))
		if err := writeRows(ctx, js, kv.Bucket(), rows[:n], revs); err != nil {
			return err
		}
		rows = rows[n:]
	}
	b, _ := json.Marshal(meta)
	if _, err := kv.Put(ctx, MetaKey, b); err != nil {
		return fmt.Errorf("writing projection stamp: %w", err)
	}
	return nil
}

// revisions maps a job to the bucket revision (the KV stream's sequence) of its row as
// a writer last saw it; absent: no row.
type revisions map[string]uint64

// writeRows publishes rows asynchronously and waits for every acknowledgement.
//
// Each write expects the row's last revision (Nats-Expected-Last-Subject-Sequence), so
// it can only replace the row it was made over. Unconditional writes lost rows in the
// cluster fault run: a flush whose acknowledgements timed out while a node was frozen
// was retried with newer rows, and the first attempt's publish, held by the frozen
// server, was stored after the retry when the node resumed, leaving an old row under a
// newer stamp. Now such a late write finds the revision moved and is refused. A write
// refused because the row moved (another read side wrote it, or an earlier attempt of
// this one landed) is settled by resolveRow: rows only move forward.
func writeRows(ctx context.Context, js jetstream.JetStream, bucket string, rows []Row, revs revisions) error {
	futures := make([]jetstream.PubAckFuture, 0, len(rows))
	for _, r := range rows {
		f, err := js.PublishAsync(events.KVSubject(bucket, JobKey(r.JobID)), encodeRow(r),
			jetstream.WithExpectLastSequencePerSubject(revs[r.JobID]))
		if err != nil {
			return fmt.Errorf("writing projection row %s: %w", r.JobID, err)
		}
		futures = append(futures, f)
	}
	var moved []Row
	for i, f := range futures {
		select {
		case ack := <-f.Ok():
			revs[rows[i].JobID] = ack.Sequence
		case err := <-f.Err():
			if !wrongLastSeq(err) {
				return fmt.Errorf("writing projection row %s: %w", rows[i].JobID, err)
			}
			moved = append(moved, rows[i])
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if len(moved) == 0 {
		return nil
	}
	stream, err := js.Stream(ctx, "KV_"+bucket)
	if err != nil {
		return fmt.Errorf("writing projection rows: %w", err)
	}
	for _, r := range moved {
		if err := resolveRow(ctx, js, stream, bucket, r, revs); err != nil {
			return err
		}
	}
	return nil
}

// resolveRow writes r over the bucket's row for its job unless that row is as new (its
// LastSeq at least r's) or newer, and records the revision the bucket then holds. The
// row is read with a direct get, which any replica may answer: one that lags behind
// gives an old revision, the write is refused again, and the row is read again after a
// pause, until the read is current.
func resolveRow(ctx context.Context, js jetstream.JetStream, stream jetstream.Stream, bucket string, r Row, revs revisions) error {
	subject := events.KVSubject(bucket, JobKey(r.JobID))
	pause := 5 * time.Millisecond
	for first := true; ; first = false {
		if !first {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(pause):
			}
			pause = min(2*pause, time.Second)
		}
		var rev uint64
		m, err := stream.GetLastMsgForSubject(ctx, subject)
		switch {
		case errors.Is(err, jetstream.ErrMsgNotFound):
		case err != nil:
			return fmt.Errorf("reading projection row %s: %w", r.JobID, err)
		default:
			rev = m.Sequence
			if op := m.Header.Get("KV-Operation"); op == "" {
				var cur Row
				if err := json.Unmarshal(m.Data, &cur); err != nil {
					return fmt.Errorf("reading projection row %s: %w", r.JobID, err)
				}
				if cur.LastSeq >= r.LastSeq {
					revs[r.JobID] = rev
					return nil
				}
			}
		}
		ack, err := js.Publish(ctx, subject, encodeRow(r), jetstream.WithExpectLastSequencePerSubject(rev))
		if err == nil {
			revs[r.JobID] = ack.Sequence
			return nil
		}
		if !wrongLastSeq(err) {
			return fmt.Errorf("writing projection row %s: %w", r.JobID, err)
		}
	}
}

// wrongLastSeq reports a write refused because its subject's last sequence moved
// (replicated streams answer 10164 rather than 10071).
func wrongLastSeq(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}

// Difference is one job whose row differs between the live projection and a rebuild.
type Difference struct {
	Job     string `json:"job"`
	Live    *Row   `json:"live,omitempty"`    // nil: missing from the live projection
	Rebuilt *Row   `json:"rebuilt,omitempty"` // nil: missing from the rebuild
}

// Comparison is the result of Compare.
type Comparison struct {
	LiveSeq     uint64       `json:"live_seq"`    // the live projection's stamp
	Behind      int          `json:"behind"`      // jobs with events the live projection has not folded yet
	Differences []Difference `json:"differences"` // rows that differ where both saw the same events
}

// Compare checks the live projection in bucket against a table rebuilt from the log up
// to sequence upTo. A row is compared where both have folded the same events: a live row
// stamped after upTo has moved on since the rebuild read the log, and a rebuilt row
// stamped after the live projection's stamp holds events it has not folded yet (it is
// behind, not wrong). Every other row must be identical, and present on both sides.
func Compare(ctx context.Context, js jetstream.JetStream, bucket string, rebuilt *Table, upTo uint64) (Comparison, error) {
	kv, err := js.KeyValue(ctx, bucket)
	if err != nil {
		return Comparison{}, fmt.Errorf("live projection %s: %w", bucket, err)
	}
	live, stamp, err := loadProjection(ctx, kv)
	if err != nil {
		return Comparison{}, err
	}
	c := Comparison{LiveSeq: stamp, Differences: []Difference{}}
	for _, r := range rebuilt.Rows() {
		l, ok := live.Row(r.JobID)
		switch {
		case ok && l.LastSeq > upTo:
		case r.LastSeq > stamp:
			c.Behind++
		case !ok:
			c.Differences = append(c.Differences, Difference{Job: r.JobID, Rebuilt: &r})
		case !bytes.Equal(encodeRow(l), encodeRow(r)):
			c.Differences = append(c.Differences, Difference{Job: r.JobID, Live: &l, Rebuilt: &r})
		}
	}
	for _, l := range live.Rows() {
		if _, ok := rebuilt.Row(l.JobID); !ok && l.LastSeq <= upTo {
			c.Differences = append(c.Differences, Difference{Job: l.JobID, Live: &l})
		}
	}
	return c, nil
}
