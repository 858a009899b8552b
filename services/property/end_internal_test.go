package property

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/pkg/bus"
	"github.com/nats-io/nats.go/jetstream"
)

// A projector that starts after a session's values were projected (by itself before a
// restart, or by another read side) finds them in the bucket, and purges them when it
// reads the session's end.
func TestProjectorStartedAgainPurgesAnEndedSession(t *testing.T) {
	ctx := context.Background()
	b, err := bus.Open(ctx, bus.Config{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, err := events.Provision(ctx, b.JS, events.StreamOptions{}); err != nil {
		t.Fatal(err)
	}
	store := events.NewStore(b.Conn, b.JS, "test/property")
	session, writer := events.NewID(), events.NewID()
	add := func(name events.Name, data any) {
		t.Helper()
		st, err := store.State(ctx, session)
		if err != nil {
			t.Fatal(err)
		}
		ev, err := events.New(session, name, "", time.Now(), data)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := store.Append(ctx, st.LastSeq, st.LastHash, ev); err != nil {
			t.Fatal(err)
		}
	}
	parent, err := events.New(session, events.Submitted, "", time.Now(),
		events.Job{ID: session, Kind: events.KindGroup, DDS: &events.DDSContext{Topology: "t"}, Children: []string{writer}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Create(ctx, parent); err != nil {
		t.Fatal(err)
	}
	d := events.PropertySetData{Key: "peer", Value: "a", Task: writer, Scope: events.ScopeGlobal}
	add(events.PropertySet, d)
	const name = "test-properties"
	run := func(until func(jetstream.KeyValue) bool) {
		t.Helper()
		rctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			runProjector(rctx, b.JS, name, 10*time.Millisecond, slog.New(slog.DiscardHandler))
			close(done)
		}()
		defer func() { cancel(); <-done }()
		for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if kv, err := b.JS.KeyValue(ctx, name); err == nil && until(kv) {
				return
			}
		}
		t.Fatal("the projector never got there")
	}
	key := EntryKey(session, d)
	run(func(kv jetstream.KeyValue) bool { _, err := kv.Get(ctx, key); return err == nil })
	add(events.Cancelled, events.EndData{Reason: "stopped", Group: &events.GroupSummary{Children: 1}})
	run(func(kv jetstream.KeyValue) bool {
		_, err := kv.Get(ctx, key)
		return errors.Is(err, jetstream.ErrKeyNotFound)
	})
}

// The hub forgets a purged key, and a session whose keys are all gone.
func TestHubForgetsPurgedKeys(t *testing.T) {
	h := newHub()
	for _, k := range []string{"a", "b"} {
		d := events.PropertySetData{Key: k, Scope: events.ScopeGlobal}
		h.publish(EntryKey("S1", d), Entry{Session: "S1", PropertySetData: d, Seq: 1})
	}
	h.forget(EntryKey("S1", events.PropertySetData{Key: "a", Scope: events.ScopeGlobal}))
	if now := h.snapshot("S1"); len(now) != 1 || now[0].Key != "b" {
		t.Fatalf("after forgetting a, the hub holds %+v", now)
	}
	h.forget(EntryKey("S1", events.PropertySetData{Key: "b", Scope: events.ScopeGlobal}))
	if _, ok := h.latest["S1"]; ok {
		t.Fatal("the hub keeps a session whose keys are all gone")
	}
}
