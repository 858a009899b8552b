package readside

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/gridwire/gridwire/events"
)

// A job's view comes from its table row exactly when the row has folded every event the
// log holds for the job, and it is then the view of the whole history's fold: at every
// point of a life, of every end, of a job with a place in a document. A row behind the
// log, a row that refused an event and a parent record are left to the read through the
// links.
func TestJobViewFromRowIsTheFoldOfTheLog(t *testing.T) {
	b, st := openBus(t)
	ctx := context.Background()
	table := NewTable()
	a := &api{store: st, js: b.JS, table: table, log: nopLog()}
	fold := func(id string) JobView {
		t.Helper()
		evs, err := st.Stored(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		s, refused := foldPrefix(evs)
		if refused != "" {
			t.Fatalf("job %s: %s", id, refused)
		}
		return ViewOf(s)
	}
	catchUp := func(id string) {
		t.Helper()
		evs, err := st.Stored(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs {
			_, _ = table.Apply(e)
		}
	}
	for n := range 6 {
		id := events.NewID()
		steps := life(id, "c1", n)
		if n == 4 {
			j := steps[0].Payload.(events.Job)
			j.Parent, j.Original.Path = events.NewID(), "job[3]/subjob[1]"
			j.DDS = &events.DDSContext{CollectionPath: "main/workers_2"}
			steps[0].Payload = j
		}
		for k, s := range steps {
			play(t, st, id, t0.Add(time.Duration(10*n+k)*time.Second), []step{s})
			if _, ok := a.fromRow(ctx, id); ok {
				t.Fatalf("job %s after %s: served from a row behind the log", id, s.Name)
			}
			catchUp(id)
			v, ok := a.fromRow(ctx, id)
			if !ok {
				t.Fatalf("job %s after %s: not served from a row that folded the whole log", id, s.Name)
			}
			if diff := cmp.Diff(fold(id), v); diff != "" {
				t.Fatalf("job %s after %s: row's view differs from the fold's (-fold +row):\n%s", id, s.Name, diff)
			}
		}
		if v, _ := a.fromRow(ctx, id); n == 4 && (v.Path != "job[3]/subjob[1]" || v.Collection != "main/workers_2") {
			t.Fatalf("view %+v lost the job's place", v)
		}
	}

	gidOld := events.NewID()

	// An event the fold refuses (written around the store): the row stays behind the
	// stream's count, and the read through the links names the event.
	id := events.NewID()
	play(t, st, id, t0, life(id, "c1", 0)[:2])
	again, _ := events.New(id, events.Submitted, "", t0, events.Job{ID: id})
	again.Source = "x/y"
	body, _ := again.Encode()
	if _, err := b.JS.Publish(ctx, events.Subject(id, events.Submitted, ""), body); err != nil {
		t.Fatal(err)
	}
	catchUp(id)
	if _, ok := a.fromRow(ctx, id); ok {
		t.Fatal("a job with a refused event served from its row")
	}

	// A child's row written before rows kept the job's place (loaded from the bucket):
	// its view would lose the place, so it is read through the links.
	cid := events.NewID()
	play(t, st, cid, t0, []step{{Name: events.Submitted, Payload: events.Job{ID: cid, Parent: gidOld, Original: events.Original{Path: "job[1]"}}}})
	catchUp(cid)
	if _, ok := a.fromRow(ctx, cid); !ok {
		t.Fatal("a child's row that keeps its place not served from the row")
	}
	old, _ := table.Row(cid)
	old.Job.Original.Path = ""
	table.Set(old) // as a row of the bucket before rows kept the place
	if _, ok := a.fromRow(ctx, cid); ok {
		t.Fatal("a child's row without its place served from the row")
	}

	// A parent record's view counts its children: never from a row.
	gid := events.NewID()
	play(t, st, gid, t0, []step{{Name: events.Submitted, Payload: events.Job{ID: gid, Kind: events.KindGroup, Children: []string{id}}}})
	catchUp(gid)
	if _, ok := a.fromRow(ctx, gid); ok {
		t.Fatal("a parent record served from its row")
	}
}

// Through HTTP, with the read side's own projector: a job read once the projection has
// caught up asks the store for nothing, and shows what the read through the links shows.
func TestJobReadServedFromTheTable(t *testing.T) {
	b, st := openBus(t)
	counting := &countingStore{Store: st}
	ln := &cutListener{Listener: listenLoopback(t)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Config{FlushEvery: 10 * time.Millisecond}, Deps{JS: b.JS, Store: counting, Logger: nopLog(), HTTP: HTTP{Listener: ln}})
	}()
	t.Cleanup(func() { ln.cut(); cancel(); <-done })
	url := "http://" + ln.Addr().String()
	id := events.NewID()
	play(t, st, id, t0, life(id, "c1", 0))
	evs, err := st.Stored(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := foldPrefix(evs)
	var v JobView
	// A read while the row is behind the log is answered through the links (a read of
	// the store) and is as current: wait for one served by the row alone, which the
	// table reaches once it has folded the whole history. Without the row path no read
	// ever gets there.
	var before int64
	eventually(t, "a job read served by the row alone", func() bool {
		before = counting.n.Load()
		return getJSON(t, url+"/v1/jobs/"+id, &v) == 200 && v.Seq == evs[len(evs)-1].Seq && counting.n.Load() == before
	})
	if code := getJSON(t, url+"/v1/jobs/"+id, &v); code != 200 || counting.n.Load() != before {
		t.Fatalf("GET job after the row caught up: %d, %d reads of the store", code, counting.n.Load()-before)
	}
	if diff := cmp.Diff(ViewOf(want), v); diff != "" {
		t.Fatalf("job view (-fold +served):\n%s", diff)
	}
	// as_of folds from the log.
	if code := getJSON(t, url+"/v1/jobs/"+id+"?as_of="+evs[2].Time.Format(time.RFC3339Nano), &v); code != 200 || counting.n.Load() == before || v.Events != 3 {
		t.Fatalf("GET job as_of: %d, %d reads, %d events", code, counting.n.Load()-before, v.Events)
	}
}

// countingStore counts the reads of job histories.
type countingStore struct {
	Store
	n atomic.Int64
}

func (s *countingStore) Stored(ctx context.Context, id string) ([]events.Event, error) {
	s.n.Add(1)
	return s.Store.Stored(ctx, id)
}
