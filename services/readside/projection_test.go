package readside

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/gridwire/gridwire/events"
	"github.com/nats-io/nats.go/jetstream"
)

// bucketRows reads every row and the stamp of a projection bucket.
func bucketRows(t *testing.T, js jetstream.JetStream, bucket string) (map[string]Row, Meta) {
	t.Helper()
	ctx := context.Background()
	kv, err := js.KeyValue(ctx, bucket)
	if err != nil {
		t.Fatal(err)
	}
	table, _, err := loadProjection(ctx, kv)
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]Row{}
	for _, r := range table.Rows() {
		rows[r.JobID] = r
	}
	entry, err := kv.Get(ctx, MetaKey)
	if err != nil {
		t.Fatal(err)
	}
	var m Meta
	if err := json.Unmarshal(entry.Value(), &m); err != nil {
		t.Fatal(err)
	}
	return rows, m
}

// The live projector's KV table equals a rebuild from scratch, and each row equals the
// stripped fold of the job's whole history.
func TestProjectionRebuiltEqualsLive(t *testing.T) {
	b, st := openBus(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- runProjector(ctx, b.JS, JobsBucket, 20*time.Millisecond, slog.New(slog.DiscardHandler), nil, nil)
	}()
	var ids []string
	for n := 0; n < 30; n++ {
		id := events.NewID()
		ids = append(ids, id)
		steps := life(id, []string{"c1", "c2"}[n%2], n)
		play(t, st, id, t0.Add(time.Duration(n)*time.Minute), steps[:len(steps)-n%5]) // some jobs still running
	}
	stream, _ := b.JS.Stream(context.Background(), "JOBS")
	last := stream.CachedInfo().State.LastSeq
	eventually(t, "the live projection to reach the last event", func() bool {
		kv, err := b.JS.KeyValue(context.Background(), JobsBucket)
		if err != nil {
			return false
		}
		e, err := kv.Get(context.Background(), MetaKey)
		var m Meta
		return err == nil && json.Unmarshal(e.Value(), &m) == nil && m.Seq == last
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	live, liveMeta := bucketRows(t, b.JS, JobsBucket)
	_, res, err := Rebuild(context.Background(), b.JS, RebuildOptions{Bucket: "rebuilt", Shards: 3})
	if err != nil {
		t.Fatal(err)
	}
	if res.Events != last || res.Refused != 0 || res.Jobs != 30 {
		t.Fatalf("rebuild read %+v, want %d events of 30 jobs", res, last)
	}
	rebuilt, rebuiltMeta := bucketRows(t, b.JS, "rebuilt")
	if d := cmp.Diff(live, rebuilt); d != "" {
		t.Fatalf("rebuilt projection differs from the live one (-live +rebuilt):\n%s", d)
	}
	if d := cmp.Diff(liveMeta, rebuiltMeta); d != "" {
		t.Fatalf("stamps differ (-live +rebuilt):\n%s", d)
	}
	for _, id := range ids {
		h, err := st.Load(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		full, err := events.Replay(h.Events)
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(strip(full), live[id]); d != "" {
			t.Fatalf("job %s: projection row differs from the fold of its history:\n%s", id, d)
		}
	}
	if n := liveMeta.Counts["c1"]["RUNNING"] + liveMeta.Counts["c2"]["RUNNING"]; n == 0 {
		t.Fatalf("counts %v: no running job counted", liveMeta.Counts)
	}
}

// A projector that stops and starts again resumes from its stamp: events folded before
// are not folded twice, events appended while it was down are folded.
func TestProjectorResumesFromItsStamp(t *testing.T) {
	b, st := openBus(t)
	run := func() (context.CancelFunc, chan error) {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			done <- runProjector(ctx, b.JS, JobsBucket, 10*time.Millisecond, slog.New(slog.DiscardHandler), nil, nil)
		}()
		return cancel, done
	}
	id := events.NewID()
	steps := life(id, "c1", 4) // exit code 1
	cancel, done := run()
	play(t, st, id, t0, steps[:6])
	waitStamp(t, b.JS)
	cancel()
	<-done
	play(t, st, id, t0.Add(time.Hour), steps[6:])
	cancel, done = run()
	defer func() { cancel(); <-done }()
	waitStamp(t, b.JS)
	rows, _ := bucketRows(t, b.JS, JobsBucket)
	if r := rows[id]; r.Status != events.StatusFailed || r.Events != len(steps) {
		t.Fatalf("row after restart: %s with %d events, want FAILED with %d", r.Status, r.Events, len(steps))
	}
}

// waitStamp waits until the projection's stamp reaches the stream's last sequence.
func waitStamp(t *testing.T, js jetstream.JetStream) {
	t.Helper()
	stream, _ := js.Stream(context.Background(), "JOBS")
	last := stream.CachedInfo().State.LastSeq
	eventually(t, fmt.Sprintf("the projection stamp to reach %d", last), func() bool {
		kv, err := js.KeyValue(context.Background(), JobsBucket)
		if err != nil {
			return false
		}
		e, err := kv.Get(context.Background(), MetaKey)
		var m Meta
		return err == nil && json.Unmarshal(e.Value(), &m) == nil && m.Seq >= last
	})
}

func TestSelectFiltersAndPages(t *testing.T) {
	tb := NewTable()
	var ids []string
	for n := 0; n < 10; n++ {
		id := fmt.Sprintf("J%02d", n)
		ids = append(ids, id)
		for i, s := range life(id, []string{"a", "b"}[n%2], n)[:3+n%4] {
			e, _ := events.New(id, s.Name, s.Route, t0.Add(time.Duration(n)*time.Hour+time.Duration(i)*time.Second), s.Payload)
			e.Seq = uint64(n*100 + i + 1)
			if _, err := tb.Apply(e); err != nil {
				t.Fatal(err)
			}
		}
	}
	idsOf := func(p Page) []string {
		var out []string
		for _, v := range p.Jobs {
			out = append(out, v.ID)
		}
		return out
	}
	cases := []struct {
		name string
		q    Query
		want []string
		next string
	}{
		{"all, first page", Query{Limit: 3}, ids[:3], "J02"},
		{"second page", Query{Limit: 3, After: "J02"}, ids[3:6], "J05"},
		{"last page", Query{Limit: 5, After: "J04"}, ids[5:], ""},
		{"descending", Query{Limit: 2, Descending: true}, []string{"J09", "J08"}, "J08"},
		{"descending after", Query{Limit: 2, Descending: true, After: "J08"}, []string{"J07", "J06"}, "J06"},
		{"cluster", Query{Cluster: "b"}, []string{"J01", "J03", "J05", "J07", "J09"}, ""},
		{"state", Query{States: []events.Status{events.StatusQueued}}, []string{"J03", "J07"}, ""},
		{"states", Query{States: []events.Status{events.StatusQueued, events.StatusSubmitted}}, []string{"J03", "J07"}, ""},
		{"submitter", Query{Submitter: "user1", Cluster: "a"}, nil, ""},
		{"time window", Query{Since: t0.Add(2 * time.Hour), Until: t0.Add(4 * time.Hour)}, []string{"J02", "J03"}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := tb.Select(c.q)
			if d := cmp.Diff(c.want, idsOf(p)); d != "" || p.Next != c.next {
				t.Fatalf("got %v next %q, want %v next %q\n%s", idsOf(p), p.Next, c.want, c.next, d)
			}
		})
	}
}

func sampleBodies(t testing.TB) [][]byte {
	var out [][]byte
	id := "01JDJ7Q1ZQ3S2K2B9Y4N3Y8W5A"
	for i, s := range life(id, "c1", 1) {
		e, err := events.New(id, s.Name, s.Route, t0.Add(time.Duration(i)*time.Millisecond+7), s.Payload)
		if err != nil {
			t.Fatal(err)
		}
		e.Source = "gridwire/test/host-1"
		if i > 0 {
			e.PrevHash, e.PrevSeq, e.Principal = "ab12", uint64(i), "alice \u00e9"
		}
		body, err := e.Encode()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, body)
	}
	return out
}

// Compare finds a row that differs and a row missing on either side.
func TestCompareFindsDifferences(t *testing.T) {
	b, st := openBus(t)
	a, c := events.NewID(), events.NewID()
	play(t, st, a, t0, life(a, "c1", 0)[:3])
	play(t, st, c, t0, life(c, "c1", 0)[:3])
	table, res, err := Rebuild(context.Background(), b.JS, RebuildOptions{Bucket: JobsBucket})
	if err != nil {
		t.Fatal(err)
	}
	if c, err := Compare(context.Background(), b.JS, JobsBucket, table, res.Seq); err != nil || len(c.Differences) != 0 || c.Behind != 0 {
		t.Fatalf("identical projections differ: %+v %v", c, err)
	}
	kv, _ := b.JS.KeyValue(context.Background(), JobsBucket)
	r, _ := table.Row(a)
	r.Status = events.StatusRunning
	if _, err := kv.Put(context.Background(), JobKey(a), encodeRow(r)); err != nil {
		t.Fatal(err)
	}
	if err := kv.Delete(context.Background(), JobKey(c)); err != nil {
		t.Fatal(err)
	}
	c2, err := Compare(context.Background(), b.JS, JobsBucket, table, res.Seq)
	d := c2.Differences
	if err != nil || len(d) != 2 {
		t.Fatalf("differences %+v (%v), want a changed row and a missing one", d, err)
	}
	for _, x := range d {
		changed := x.Job == a && x.Live != nil && x.Live.Status == events.StatusRunning && x.Rebuilt != nil
		missing := x.Job == c && x.Live == nil && x.Rebuilt != nil
		if !changed && !missing {
			t.Errorf("unexpected difference %+v", x)
		}
	}
	// A live projection that has not folded the last events is behind, not different.
	meta, _ := json.Marshal(Meta{Seq: res.Seq - 1})
	if _, err := kv.Put(context.Background(), MetaKey, meta); err != nil {
		t.Fatal(err)
	}
	r, _ = table.Row(c)
	if _, err := kv.Put(context.Background(), JobKey(c), encodeRow(r)); err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(context.Background(), JobKey(a), encodeRow(mustRow(t, table, a))); err != nil {
		t.Fatal(err)
	}
	if c3, err := Compare(context.Background(), b.JS, JobsBucket, table, res.Seq); err != nil || c3.Behind != 1 || len(c3.Differences) != 0 {
		t.Fatalf("a projection one event behind: %+v %v, want 1 job behind and no difference", c3, err)
	}
}

func mustRow(t *testing.T, tb *Table, id string) Row {
	t.Helper()
	r, ok := tb.Row(id)
	if !ok {
		t.Fatalf("no row for %s", id)
	}
	return r
}
