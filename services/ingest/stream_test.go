package ingest

import (
	"bytes"
	"context"
	"errors"
	"math"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"

	"github.com/gridwire/gridwire/events"
)

// bigTopology is topology100k with n groups: 4n instances.
func bigTopology(n int) []byte {
	return bytes.Replace(topology100k, []byte(`value="25000"`), []byte(`value="`+strconv.Itoa(n)+`"`), 1)
}

// A topology of StreamMin instances or more is submitted as a stream: the same jobs, in
// the same order, as the whole-list path gives, the session naming its children as one
// range of consecutive IDs, each child pointing at the session.
func TestStreamedTopologyIsTheSameSubmission(t *testing.T) {
	store := &memStore{}
	s, err := New(Config{}, Deps{Store: store})
	if err != nil {
		t.Fatal(err)
	}
	data := bigTopology(StreamMin / 4)
	acc, err := s.Submit(context.Background(), Submission{File: "big.xml", Data: data, Submitter: "u"})
	if err != nil {
		t.Fatal(err)
	}
	want, err := Parse("big.xml", data, ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(store.created) != len(want) || len(acc.Jobs) != len(want) || acc.Parent != acc.Jobs[0] {
		t.Fatalf("%d events, %d accepted, want %d", len(store.created), len(acc.Jobs), len(want))
	}
	var parent events.Job
	if err := store.created[0].Payload(&parent); err != nil || parent.ChildRange == nil || parent.NumChildren() != len(want)-1 ||
		store.created[0].Route != events.RouteGroup {
		t.Fatalf("session %+v (%v), want a range of %d children", parent.ChildRange, err, len(want)-1)
	}
	ids := parent.ChildIDs()
	for _, i := range []int{1, 2, len(want) / 2, len(want) - 1} {
		var j events.Job
		if err := store.created[i].Payload(&j); err != nil {
			t.Fatal(err)
		}
		w := want[i]
		if j.ID != ids[i-1] || j.Parent != acc.Parent || j.Submitter != "u" || j.Name != w.Name || j.DDS.TaskID != w.DDS.TaskID ||
			j.Original.Index != i || j.Executable != w.Executable {
			t.Errorf("instance %d: %s %s %q, want %s of %s as %q", i, j.ID, j.Parent, j.Name, ids[i-1], acc.Parent, w.Name)
		}
	}
}

// One instance no target can carry refuses the whole stream before anything is stored.
func TestStreamedTopologyWithABadInstanceStoresNothing(t *testing.T) {
	store := &memStore{}
	s, _ := New(Config{}, Deps{Store: store, Check: func(j events.Job) error {
		if j.Original.Index == StreamMin-1 {
			return errors.New("refused by the check")
		}
		return nil
	}})
	_, err := s.Submit(context.Background(), Submission{File: "big.xml", Data: bigTopology(StreamMin / 4)})
	if !errors.Is(err, ErrInvalid) || len(store.created) != 0 {
		t.Fatalf("%v with %d events stored, want refused with none", err, len(store.created))
	}
}

// failingStore stores n events, then refuses every one.
type failingStore struct {
	memStore
	n int
}

func (f *failingStore) Create(ctx context.Context, e events.Event) (uint64, error) {
	if len(f.created) == f.n {
		return 0, errors.New("the store is full")
	}
	return f.memStore.Create(ctx, e)
}

// A store that fails in the middle of a stream ends it: Submit returns the store's
// error, the jobs stored before it as accepted, and expands no further.
func TestStreamedTopologyStopsAtAStoreError(t *testing.T) {
	store := &failingStore{n: streamWindow + 100}
	s, _ := New(Config{}, Deps{Store: store})
	acc, err := s.Submit(context.Background(), Submission{File: "big.xml", Data: bigTopology(StreamMin / 4)})
	if err == nil || !strings.Contains(err.Error(), "the store is full") || len(store.created) != store.n {
		t.Fatalf("%v with %d stored, want the store's error after %d", err, len(store.created), store.n)
	}
	if len(acc.Jobs) > store.n {
		t.Fatalf("%d jobs accepted, %d stored", len(acc.Jobs), store.n)
	}
}

// A stream relaxes the collector while it runs and puts the process's own settings
// back when it ends, the last of two overlapping streams included.
func TestStreamPutsTheCollectorBack(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(math.MaxInt64))
	relaxGC()
	relaxGC()
	if p := debug.SetGCPercent(-1); p != relaxedGCPercent || debug.SetMemoryLimit(-1) != relaxedMemoryLimit {
		t.Fatalf("during two streams: GOGC %d, limit %d", p, debug.SetMemoryLimit(-1))
	}
	debug.SetGCPercent(relaxedGCPercent)
	restoreGC()
	if p := debug.SetGCPercent(relaxedGCPercent); p != relaxedGCPercent {
		t.Fatalf("with one stream left: GOGC %d", p)
	}
	restoreGC()
	if p := debug.SetGCPercent(100); p != 100 || debug.SetMemoryLimit(-1) != math.MaxInt64 {
		t.Fatalf("after both: GOGC %d, limit %d", p, debug.SetMemoryLimit(-1))
	}
	// An operator's more relaxed setting is left alone.
	debug.SetGCPercent(400)
	relaxGC()
	if p := debug.SetGCPercent(400); p != 400 || debug.SetMemoryLimit(-1) != math.MaxInt64 {
		t.Fatalf("GOGC 400 became %d, limit %d", p, debug.SetMemoryLimit(-1))
	}
	restoreGC()
	if p := debug.SetGCPercent(100); p != 400 {
		t.Fatalf("GOGC 400 became %d after the stream", p)
	}
}
