package property

import (
	"context"
	"strconv"
	"testing"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/pkg/bus"
)

// A watcher that falls 256 values behind is cut off (its queue closed, to resume from
// its last id), and no other session's values reach it; the hub keeps the latest.
func TestHubCutsOffASlowWatcherOnly(t *testing.T) {
	h := newHub()
	slow, _ := h.subscribe("S1")
	other, _ := h.subscribe("S2")
	for i := 1; i <= 300; i++ {
		d := events.PropertySetData{Key: "k" + strconv.Itoa(i%3), Value: "v", Scope: events.ScopeGlobal}
		h.publish(EntryKey("S1", d), Entry{Session: "S1", PropertySetData: d, Seq: uint64(i)})
	}
	n := 0
	for range slow.ch {
		n++
	}
	if n != 256 {
		t.Fatalf("the slow watcher got %d before its queue closed, want 256", n)
	}
	if len(other.ch) != 0 || other.cut {
		t.Fatalf("another session's watcher got %d values (cut %v)", len(other.ch), other.cut)
	}
	if now := h.snapshot("S1"); len(now) != 3 || now[2].Seq != 300 {
		t.Fatalf("the hub holds %d entries, last %+v; want the 3 keys' latest", len(now), now[len(now)-1])
	}
	h.unsubscribe("S1", slow) // after a cut: nothing to do, no panic
}

// Two projectors at different paces: the one behind never takes a key back to an older
// value.
func TestPutNewerNeverGoesBack(t *testing.T) {
	b, err := bus.Open(context.Background(), bus.Config{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, err := events.Provision(context.Background(), b.JS, events.StreamOptions{}); err != nil {
		t.Fatal(err)
	}
	kv, err := bucket(context.Background(), b.JS, "test-properties")
	if err != nil {
		t.Fatal(err)
	}
	d := events.PropertySetData{Key: "peer", Scope: events.ScopeGlobal}
	for _, seq := range []uint64{5, 9, 7, 9, 3} {
		d.Value = strconv.FormatUint(seq, 10)
		if err := putNewer(context.Background(), kv, Entry{Session: "S", PropertySetData: d, Seq: seq}); err != nil {
			t.Fatal(err)
		}
	}
	e, err := kv.Get(context.Background(), EntryKey("S", d))
	if err != nil {
		t.Fatal(err)
	}
	if en, _ := decodeEntry(e.Value()); en.Seq != 9 || en.Value != "9" {
		t.Fatalf("the view holds %+v, want the value of seq 9", en)
	}
	if e.Revision() != 2 {
		t.Fatalf("revision %d: the older and repeated writes were not skipped", e.Revision())
	}
}
