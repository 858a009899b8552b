package readside

import (
	"context"
	"testing"

	"github.com/gridwire/gridwire/events"
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
