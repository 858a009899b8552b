package readside

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/gridwire/gridwire/events"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// holdingJS holds back the first asynchronous publish to one subject: the message is
// not sent, its future fails as a timed-out acknowledgement does, and release sends it
// later with the options it was given. That is what a frozen NATS node did in the
// cluster fault run: it kept a row write whose acknowledgement the projector had given
// up on, and stored it when it resumed, after the projector had written a newer row.
type holdingJS struct {
	jetstream.JetStream
	subject string
	mu      sync.Mutex
	armed   bool
	held    *nats.Msg
	opts    []jetstream.PublishOpt
}

func (j *holdingJS) PublishAsync(subj string, data []byte, opts ...jetstream.PublishOpt) (jetstream.PubAckFuture, error) {
	j.mu.Lock()
	if j.armed && subj == j.subject {
		j.armed = false
		j.held, j.opts = &nats.Msg{Subject: subj, Data: data}, opts
		j.mu.Unlock()
		return timedOut(j.held), nil
	}
	j.mu.Unlock()
	return j.JetStream.PublishAsync(subj, data, opts...)
}

func (j *holdingJS) holding() bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.held != nil
}

// release sends the held publish as it was made, and returns the server's answer.
func (j *holdingJS) release(ctx context.Context) error {
	j.mu.Lock()
	m, opts := j.held, j.opts
	j.mu.Unlock()
	_, err := j.JetStream.PublishMsg(ctx, m, opts...)
	return err
}

type failedFuture struct {
	msg *nats.Msg
	err chan error
}

func timedOut(m *nats.Msg) jetstream.PubAckFuture {
	f := &failedFuture{msg: m, err: make(chan error, 1)}
	f.err <- jetstream.ErrAsyncPublishTimeout
	return f
}

func (f *failedFuture) Ok() <-chan *jetstream.PubAck { return nil }
func (f *failedFuture) Err() <-chan error            { return f.err }
func (f *failedFuture) Msg() *nats.Msg               { return f.msg }

// A row write whose acknowledgement timed out, stored by the server only after the
// projector retried and wrote a newer row and the stamp past it, must not replace the
// newer row: the live projection never ends with a row older than its stamp says.
func TestLateRowWriteDoesNotOvertakeNewerRow(t *testing.T) {
	b, st := openBus(t)
	id := events.NewID()
	steps := life(id, "c1", 3) // exit code 0: SUCCEEDED
	play(t, st, id, t0, steps[:len(steps)-1])
	js := &holdingJS{JetStream: b.JS, subject: events.KVSubject(JobsBucket, JobKey(id)), armed: true}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- runProjector(ctx, js, JobsBucket, 10*time.Millisecond, slog.New(slog.DiscardHandler), nil, nil)
	}()
	eventually(t, "the first row write to be held", js.holding)
	play(t, st, id, t0.Add(time.Hour), steps[len(steps)-1:])
	waitStamp(t, b.JS)
	rows, _ := bucketRows(t, b.JS, JobsBucket)
	if r := rows[id]; r.Status != events.StatusSucceeded {
		t.Fatalf("row before the late write: %s, want SUCCEEDED", r.Status)
	}
	// The frozen node resumes: the first attempt's write reaches the stream now.
	err := js.release(context.Background())
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	rows, meta := bucketRows(t, b.JS, JobsBucket)
	r := rows[id]
	if r.Status != events.StatusSucceeded || r.Events != len(steps) || meta.Seq < r.LastSeq {
		t.Fatalf("after the late write (refused: %v): row %s with %d events at %d under stamp %d, want SUCCEEDED with %d events",
			err, r.Status, r.Events, r.LastSeq, meta.Seq, len(steps))
	}
	if !wrongLastSeq(err) {
		t.Fatalf("the late write was answered %v, want a wrong-last-sequence refusal", err)
	}
}

// Two read sides write the same bucket: a writer behind the other never puts its older
// row over the newer one, and a writer whose revision is out of date still moves a row
// forward.
func TestRowsOnlyMoveForwardBetweenWriters(t *testing.T) {
	b, st := openBus(t)
	ctx := context.Background()
	id := events.NewID()
	steps := life(id, "c1", 3)
	play(t, st, id, t0, steps)
	full, _, err := Rebuild(ctx, b.JS, RebuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	newer := mustRow(t, full, id)
	older := newer
	older.Status, older.LastSeq, older.Events = events.StatusStagingOut, newer.LastSeq-1, newer.Events-1
	kv, err := projectionBucket(ctx, b.JS, JobsBucket)
	if err != nil {
		t.Fatal(err)
	}
	a, behind := revisions{}, revisions{}
	if err := writeProjection(ctx, b.JS, kv, []Row{newer}, Meta{Seq: newer.LastSeq}, a); err != nil {
		t.Fatal(err)
	}
	if err := writeProjection(ctx, b.JS, kv, []Row{older}, Meta{Seq: older.LastSeq}, behind); err != nil {
		t.Fatal(err)
	}
	if behind[id] != a[id] {
		t.Fatalf("the writer behind holds revision %d, want the bucket's %d", behind[id], a[id])
	}
	rows, _ := bucketRows(t, b.JS, JobsBucket)
	if r := rows[id]; r.Status != events.StatusSucceeded {
		t.Fatalf("row after an older write: %s, want SUCCEEDED", r.Status)
	}
	// The other way round: the older row is in the bucket, and a writer with a stale
	// revision (none) writes the newer one.
	stale := revisions{}
	if err := writeProjection(ctx, b.JS, kv, []Row{older}, Meta{}, revisions{id: a[id]}); err != nil {
		t.Fatal(err)
	}
	if err := writeProjection(ctx, b.JS, kv, []Row{newer}, Meta{Seq: newer.LastSeq}, stale); err != nil {
		t.Fatal(err)
	}
	rows, _ = bucketRows(t, b.JS, JobsBucket)
	if r := rows[id]; r.Status != events.StatusSucceeded || stale[id] <= a[id] {
		t.Fatalf("row after a newer write with a stale revision: %s at revision %d, want SUCCEEDED after %d", r.Status, stale[id], a[id])
	}
}
