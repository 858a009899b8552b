package readside

import (
	"cmp"
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gridwire/gridwire/events"
	"github.com/nats-io/nats.go"
)

// The projectors below are fed by foldEvent instead of a consumer, and their clock is
// the test's, so what a flush writes depends on the test alone.

// A job still moving is not written at each of its events: its row waits until the job
// ends or its oldest unwritten change is a hold old, and the stamp meanwhile stays
// before that change, so a restart from the bucket folds it again. A job that ended is
// written at the next flush.
func TestProjectorHoldsRowsOfMovingJobs(t *testing.T) {
	b, st := openBus(t)
	ctx := context.Background()
	kv, err := projectionBucket(ctx, b.JS, JobsBucket)
	if err != nil {
		t.Fatal(err)
	}
	clock := t0
	p := &projector{js: b.JS, kv: kv, table: NewTable(), log: nopLog(), every: time.Second, hold: 10 * time.Second,
		now: func() time.Time { return clock }, dirty: map[string]unwritten{}, revs: revisions{}}

	moving, ended := events.NewID(), events.NewID()
	steps := life(moving, "c1", 0)
	play(t, st, moving, t0, steps[:7]) // started
	play(t, st, ended, t0, life(ended, "c1", 0))
	var writes atomic.Int64
	sub, err := b.Conn.Subscribe(events.KVSubject(JobsBucket, JobKey(moving)), func(*nats.Msg) { writes.Add(1) })
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()

	fold := func(ids ...string) {
		var all []events.Event
		for _, id := range ids {
			h, err := st.Load(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			all = append(all, h.Events...)
		}
		slices.SortFunc(all, func(a, b events.Event) int { return cmp.Compare(a.Seq, b.Seq) })
		for _, e := range all {
			if e.Seq > p.folded {
				p.foldEvent(e, nil)
			}
		}
	}
	fold(moving, ended)
	firstMoving := mustLoad(t, st, moving).Events[0].Seq
	flush := func(all bool) {
		if err := p.flush(ctx, all); err != nil {
			t.Fatal(err)
		}
		if err := b.Conn.Flush(); err != nil {
			t.Fatal(err)
		}
	}

	flush(false)
	rows, meta := bucketRows(t, b.JS, JobsBucket)
	if _, ok := rows[moving]; ok {
		t.Fatalf("the moving job's row was written before its hold: %+v", rows[moving])
	}
	if r := rows[ended]; r.Status != events.StatusSucceeded {
		t.Fatalf("the ended job's row: %q, want SUCCEEDED at once", r.Status)
	}
	if meta.Seq != firstMoving-1 {
		t.Fatalf("stamp %d while the moving job's events from %d are unwritten, want %d", meta.Seq, firstMoving, firstMoving-1)
	}

	// More events of the held job, within its hold: still not written, same stamp.
	play(t, st, moving, t0.Add(time.Minute), steps[7:9])
	fold(moving)
	clock = clock.Add(9 * time.Second)
	flush(false)
	if _, meta = bucketRows(t, b.JS, JobsBucket); meta.Seq != firstMoving-1 {
		t.Fatalf("stamp %d within the hold, want %d", meta.Seq, firstMoving-1)
	}

	// The hold passes: written once, with everything folded, and the stamp catches up.
	clock = clock.Add(time.Second)
	flush(false)
	rows, meta = bucketRows(t, b.JS, JobsBucket)
	if r := rows[moving]; r.Status != events.StatusStagingOut || r.Events != 9 {
		t.Fatalf("the moving job's row after its hold: %q with %d events, want STAGING_OUT with 9", r.Status, r.Events)
	}
	if meta.Seq != p.folded {
		t.Fatalf("stamp %d after every row was written, want %d", meta.Seq, p.folded)
	}

	// Its end is written at the next flush, without waiting for a hold.
	play(t, st, moving, t0.Add(2*time.Minute), steps[9:])
	fold(moving)
	flush(false)
	rows, meta = bucketRows(t, b.JS, JobsBucket)
	if r := rows[moving]; r.Status != events.StatusSucceeded || meta.Seq != p.folded {
		t.Fatalf("after the end: row %q, stamp %d, want SUCCEEDED at %d", r.Status, meta.Seq, p.folded)
	}
	if n := writes.Load(); n != 2 {
		t.Fatalf("the job's row was written %d times, want 2 (its hold, its end)", n)
	}
}

// A projector restarted from a bucket whose stamp was held back folds the held job's
// events again and ends with the row the whole history gives (a stamp past them would
// leave the new projector folding the job's last events onto no row).
func TestProjectorRestartAfterHeldRows(t *testing.T) {
	b, st := openBus(t)
	ctx := context.Background()
	kv, err := projectionBucket(ctx, b.JS, JobsBucket)
	if err != nil {
		t.Fatal(err)
	}
	p := &projector{js: b.JS, kv: kv, table: NewTable(), log: nopLog(), every: time.Second, hold: time.Hour,
		now: time.Now, dirty: map[string]unwritten{}, revs: revisions{}}
	ended, id := events.NewID(), events.NewID()
	play(t, st, ended, t0, life(ended, "c1", 0))
	steps := life(id, "c1", 1)
	play(t, st, id, t0, steps[:8])
	for _, e := range append(mustLoad(t, st, ended).Events, mustLoad(t, st, id).Events...) {
		p.foldEvent(e, nil)
	}
	if err := p.flush(ctx, false); err != nil {
		t.Fatal(err)
	}
	if _, meta := bucketRows(t, b.JS, JobsBucket); meta.Seq != mustLoad(t, st, id).Events[0].Seq-1 {
		t.Fatalf("stamp %d, want the last event before the held job's", meta.Seq)
	}
	// This projector stops without its last flush (a crash); another starts on the bucket.
	play(t, st, id, t0.Add(time.Hour), steps[8:])
	ctx2, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- runProjector(ctx2, b.JS, JobsBucket, 10*time.Millisecond, nopLog(), nil, nil) }()
	waitStamp(t, b.JS)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	rows, _ := bucketRows(t, b.JS, JobsBucket)
	full, err := events.Replay(mustLoad(t, st, id).Events)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := rows[id], strip(full); got.Status != want.Status || got.Events != want.Events || got.LastSeq != want.LastSeq {
		t.Fatalf("row after the restart: %s, %d events at %d; want %s, %d at %d",
			got.Status, got.Events, got.LastSeq, want.Status, want.Events, want.LastSeq)
	}
}

func mustLoad(t *testing.T, st *events.Store, id string) events.History {
	t.Helper()
	h, err := st.Load(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return h
}
