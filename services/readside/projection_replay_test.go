package readside

import (
	"context"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/events/eventstest"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The replay's reader takes each delivery's stream sequence from its reply subject as
// Metadata reads it, for real deliveries of an ordered consumer and for the subject form
// with a domain and account hash.
func TestStreamSeqOfMatchesMetadata(t *testing.T) {
	bus, _ := openBus(t)
	_, total := fillStream(t, bus.JS, 3)
	ctx := context.Background()
	stream, err := bus.JS.Stream(ctx, events.Stream)
	if err != nil {
		t.Fatal(err)
	}
	cons, err := stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{events.SubjectAll}})
	if err != nil {
		t.Fatal(err)
	}
	it, err := cons.Messages()
	if err != nil {
		t.Fatal(err)
	}
	defer it.Stop()
	for range total {
		m, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		meta, err := m.Metadata()
		if err != nil {
			t.Fatal(err)
		}
		if got := streamSeqOf(m.Reply()); got != meta.Sequence.Stream || got == 0 {
			t.Fatalf("streamSeqOf(%q) = %d, Metadata %d", m.Reply(), got, meta.Sequence.Stream)
		}
	}
	for reply, want := range map[string]uint64{
		"$JS.ACK.hub.ACCHASH.JOBS.cons.1.42.7.1700000000000000000.0.rnd": 42,
		"$JS.ACK.hub.ACCHASH.JOBS.cons.1.43.7.1700000000000000000.0":     43,
		"$JS.ACK.JOBS.cons.1.44.7.1700000000000000000.0":                 44,
		"$JS.ACK.JOBS.cons.1.45.7.1700000000000000000":                   0, // 8 tokens
		"$JS.ACK.JOBS.cons.1.46.7.1700000000000000000.0.x":               0, // 10 tokens
		"$JS.ACK.JOBS.cons.1.4x.7.1700000000000000000.0":                 0,
		"_INBOX.abc.1.2.3.4.5.6.7":                                       0,
		"":                                                               0,
	} {
		if got := streamSeqOf(reply); got != want {
			t.Errorf("streamSeqOf(%q) = %d, want %d", reply, got, want)
		}
	}
}

// A replay of every recorded history, with a body no decoder reads and an event the state
// machine refuses among them, gives the table a sequential fold of the same messages
// gives (Table.Apply of events.DecodeStored, the live projection's way): the same rows,
// order, counts and stamp, and reports the same refusals with their sequences.
func TestRebuildEqualsSequentialFold(t *testing.T) {
	fs, err := eventstest.LoadFixtures(filepath.Join("..", "..", "events", filepath.FromSlash(eventstest.ReplayDir)))
	if err != nil {
		t.Fatal(err)
	}
	bus, _ := openBus(t)
	ctx := context.Background()
	stranger := events.NewID()
	var msgs []*nats.Msg
	for i, f := range fs {
		for _, s := range f.Stored {
			msgs = append(msgs, &nats.Msg{Subject: s.Subject, Data: s.Body})
		}
		if i == 3 {
			msgs = append(msgs, &nats.Msg{Subject: events.Subject(stranger, events.Held, ""), Data: []byte(`{"specversion":`)})
			started, err := events.New(stranger, events.Started, "c1", t0, events.StartedData{Cluster: "c1", NativeID: "1"})
			if err != nil {
				t.Fatal(err)
			}
			started.Source = "test/replay"
			body, err := started.Encode()
			if err != nil {
				t.Fatal(err)
			}
			msgs = append(msgs, &nats.Msg{Subject: events.Subject(stranger, events.Started, "c1"), Data: body})
		}
	}
	want := NewTable()
	var wantRefused []uint64
	for _, m := range msgs {
		ack, err := bus.JS.PublishMsg(ctx, m)
		if err != nil {
			t.Fatal(err)
		}
		e, err := events.DecodeStored(m.Data, m.Subject, ack.Sequence)
		if err == nil {
			_, err = want.Apply(e)
		}
		if err != nil {
			wantRefused = append(wantRefused, ack.Sequence)
		}
	}
	want.SetSeq(uint64(len(msgs)))
	if len(wantRefused) != 2 {
		t.Fatalf("the sequential fold refused %v, want the two strangers", wantRefused)
	}
	for _, shards := range []int{1, 3} {
		var refused []uint64
		got, res, err := Rebuild(ctx, bus.JS, RebuildOptions{Shards: shards, Refused: func(e events.Event, err error) {
			refused = append(refused, e.Seq)
		}})
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(refused)
		if !slices.Equal(refused, wantRefused) || res.Refused != 2 || res.Seq != uint64(len(msgs)) || res.Jobs != len(want.rows) {
			t.Fatalf("%d shards: refused %v (%+v), want %v", shards, refused, res, wantRefused)
		}
		if d := cmp.Diff(want.Rows(), got.Rows()); d != "" {
			t.Fatalf("%d shards: rows differ (-sequential +replay):\n%s", shards, d)
		}
		if d := cmp.Diff(want.Meta(), got.Meta()); d != "" {
			t.Fatalf("%d shards: stamps and counts differ (-sequential +replay):\n%s", shards, d)
		}
		if !slices.Equal(want.order, got.order) {
			t.Fatalf("%d shards: order differs", shards)
		}
	}
}
