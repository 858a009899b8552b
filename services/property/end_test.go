package property_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/services/property"
	"github.com/nats-io/nats.go/jetstream"
)

// end ends a session as the watcher does when its tasks have ended.
func (e *env) end(session string, children int) {
	e.t.Helper()
	ctx := context.Background()
	st, err := e.store.State(ctx, session)
	if err != nil {
		e.t.Fatal(err)
	}
	ev, err := events.New(session, events.Cancelled, "", time.Now(),
		events.EndData{Reason: "stopped", Group: &events.GroupSummary{Children: children}})
	if err != nil {
		e.t.Fatal(err)
	}
	if _, err := e.store.Append(ctx, st.LastSeq, st.LastHash, ev); err != nil {
		e.t.Fatal(err)
	}
}

// liveKeys lists the live view's keys (purged ones are not listed).
func liveKeys(t *testing.T, kv jetstream.KeyValue) map[string]bool {
	t.Helper()
	keys := map[string]bool{}
	lister, err := kv.ListKeys(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for k := range lister.Keys() {
		keys[k] = true
	}
	return keys
}

// A session that ends takes its entries out of the live view, and only its own: nobody
// may read them any more. The view rebuilt from the log agrees, and an entry of an
// ended session put back into the live view by hand shows as a difference.
func TestEndedSessionLeavesTheView(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	w := task("main/w_0", "", p("peer", "write", ""), p("port", "write", ""))
	session := e.session(w)
	other := task("main/w_0", "", p("peer", "readwrite", ""))
	e.session(other)
	e.mustPut(w, "peer", "a")
	e.mustPut(w, "port", "1")
	e.mustPut(other, "peer", "b")
	kv, err := e.js.KeyValue(ctx, property.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	gone := property.EntryKey(session, events.PropertySetData{Key: "peer", Scope: events.ScopeGlobal})
	if _, err := kv.Get(ctx, gone); err != nil {
		t.Fatalf("the live view lacks %s before the session ended: %v", gone, err)
	}
	e.end(session, 1)
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
		_, err := kv.Get(ctx, gone)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s is still in the live view after its session ended: %v", gone, err)
		}
	}
	keys := liveKeys(t, kv)
	delete(keys, property.MetaKey)
	want := property.EntryKey(other.Parent, events.PropertySetData{Key: "peer", Scope: events.ScopeGlobal})
	if len(keys) != 1 || !keys[want] {
		t.Fatalf("the live view holds %v, want only the running session's %s", keys, want)
	}
	if code, v := e.get(other, "peer"); code != http.StatusOK || v.Value != "b" {
		t.Fatalf("the running session's value: %d %+v", code, v)
	}

	view, upTo, err := property.Rebuild(ctx, e.js, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(view) != 1 {
		t.Fatalf("the rebuilt view holds %d entries, want the running session's 1: %v", len(view), view)
	}
	var c property.Comparison
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		if c, err = property.Compare(ctx, e.js, property.Bucket, view, upTo); err != nil {
			t.Fatal(err)
		}
		if c.LiveSeq >= upTo || time.Now().After(deadline) {
			break
		}
	}
	if len(c.Differences) != 0 || c.Behind != 0 {
		t.Fatalf("live and rebuilt differ after a session ended: %+v", c)
	}
	en, err := json.Marshal(property.Entry{Session: session, PropertySetData: events.PropertySetData{Key: "peer", Value: "a",
		Scope: events.ScopeGlobal}, Seq: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, gone, en); err != nil {
		t.Fatal(err)
	}
	if c, err = property.Compare(ctx, e.js, property.Bucket, view, upTo); err != nil || len(c.Differences) != 1 || c.Differences[0].Key != gone {
		t.Fatalf("an ended session's entry put back: %+v (%v), want it as the one difference", c, err)
	}
}
