package events

import (
	"context"
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
