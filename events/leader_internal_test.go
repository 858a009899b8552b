package events

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/gridwire/gridwire/pkg/bus"
)

// The leader read path folds the same state as the direct one.
func TestLeaderReadMatchesDirectRead(t *testing.T) {
	ctx := context.Background()
	b, err := bus.Open(ctx, bus.Config{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	if _, err := Provision(ctx, b.JS, StreamOptions{}); err != nil {
		t.Fatal(err)
	}
	s := NewStore(b.Conn, b.JS, "test/leader", WithStateCache(0))
	id := NewID()
	now := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	sub, err := New(id, Submitted, "", now, Job{ID: id, Executable: "/bin/true"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(ctx, sub); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Decide(ctx, id, func(st State) ([]Event, error) {
		e, err := New(id, Incarnated, "", now, IncarnatedData{Cluster: "local"})
		return []Event{e}, err
	}); err != nil {
		t.Fatal(err)
	}
	direct, err := s.currentWith(ctx, s.directGet, id)
	if err != nil {
		t.Fatal(err)
	}
	leader, err := s.currentWith(ctx, s.leaderGet, id)
	if err != nil {
		t.Fatal(err)
	}
	if leader.LastSeq != direct.LastSeq || leader.LastHash != direct.LastHash || leader.Status != StatusIncarnated {
		t.Fatalf("leader read %s at %d (%s), direct %s at %d (%s)", leader.Status, leader.LastSeq,
			leader.LastHash, direct.Status, direct.LastSeq, direct.LastHash)
	}
	if _, found, err := s.leaderGet(ctx, map[string]any{"last_by_subj": JobFilter(NewID())}); err != nil || found {
		t.Fatalf("leader get of an unknown job: found %v, err %v", found, err)
	}
}

// On a replicated stream, StateFresh includes every acknowledged event even when the
// replica answering direct gets lags the log (here: it answers a job's last event with
// the one before it, as a follower that has not stored the newest yet), where State
// shows the job as that replica has it. A decision of nothing must not be believed on
// State's read; on StateFresh's it may.
func TestStateFreshReadsPastALaggingReplica(t *testing.T) {
	ctx := context.Background()
	b, err := bus.Open(ctx, bus.Config{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	if _, err := Provision(ctx, b.JS, StreamOptions{}); err != nil {
		t.Fatal(err)
	}
	writer := NewStore(b.Conn, b.JS, "test/writer")
	id := NewID()
	now := time.Date(2026, 11, 24, 3, 0, 0, 0, time.UTC)
	sub, err := New(id, Submitted, "", now, Job{ID: id, Executable: "/bin/true"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := writer.Create(ctx, sub); err != nil {
		t.Fatal(err)
	}
	if _, err := writer.Decide(ctx, id, func(st State) ([]Event, error) {
		e, err := New(id, Incarnated, "", now, IncarnatedData{Cluster: "local"})
		return []Event{e}, err
	}); err != nil {
		t.Fatal(err)
	}

	reader := NewStore(b.Conn, b.JS, "test/reader", WithStateCache(0))
	reader.anyReplica = func(ctx context.Context, req map[string]any) (Event, bool, error) {
		if _, last := req["last_by_subj"]; last {
			e, found, err := reader.directGet(ctx, req)
			if err != nil || !found || e.PrevSeq == 0 {
				return Event{}, false, err
			}
			return reader.directGet(ctx, map[string]any{"seq": e.PrevSeq})
		}
		return reader.directGet(ctx, req)
	}
	if st, err := reader.State(ctx, id); err != nil || st.Status != StatusSubmitted {
		t.Fatalf("the lagging replica's read: %s, %v; want SUBMITTED (the test's replica does not lag)", st.Status, err)
	}

	// The stream here has one replica: every read is fresh, and StateFresh is State.
	if reader.replicated(ctx) {
		t.Fatal("a stream of one replica is taken as replicated")
	}
	// Taken as replicated, as on a cluster.
	reader.replicas.replicated, reader.replicas.checked = true, time.Now()
	st, err := reader.StateFresh(ctx, id)
	if err != nil || st.Status != StatusIncarnated {
		t.Fatalf("StateFresh past a lagging replica: %s, %v; want INCARNATED", st.Status, err)
	}
	decided := State{}
	if _, err := reader.DecideFresh(ctx, id, func(st State) ([]Event, error) {
		decided = st
		return nil, nil
	}); err != nil || decided.Status != StatusIncarnated {
		t.Fatalf("DecideFresh decided on %s (%v), want INCARNATED", decided.Status, err)
	}
	if _, err := reader.StateFresh(ctx, NewID()); !errors.Is(err, ErrNotFound) {
		t.Fatalf("StateFresh of an unknown job: %v, want ErrNotFound", err)
	}
}
