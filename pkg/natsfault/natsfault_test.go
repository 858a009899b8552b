package natsfault_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/gridwire/gridwire/pkg/bus"
	"github.com/gridwire/gridwire/pkg/natsfault"
	"github.com/nats-io/nats.go/jetstream"
)

func stream(t *testing.T) (jetstream.JetStream, jetstream.Stream) {
	t.Helper()
	b, err := bus.Open(context.Background(), bus.Config{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	s, err := b.JS.CreateStream(context.Background(), jetstream.StreamConfig{Name: "T", Subjects: []string{"t.>"}})
	if err != nil {
		t.Fatal(err)
	}
	return b.JS, s
}

func stored(t *testing.T, s jetstream.Stream) uint64 {
	t.Helper()
	info, err := s.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}

// Each fault does what it says: a dropped publish stores nothing, a lost ack stores the
// message and reports a timeout, sync and async alike.
func TestPublishFaults(t *testing.T) {
	js, s := stream(t)
	ctx := context.Background()
	drop := natsfault.New(natsfault.Rates{PublishError: 1}, 1)
	if _, err := drop.Wrap(js).Publish(ctx, "t.a", []byte("x")); !errors.Is(err, natsfault.ErrInjected) || !errors.Is(err, jetstream.ErrNoStreamResponse) {
		t.Fatalf("dropped publish: %v", err)
	}
	if _, err := drop.Wrap(js).PublishAsync("t.a", []byte("x")); !errors.Is(err, natsfault.ErrInjected) {
		t.Fatalf("dropped async publish: %v", err)
	}
	if n := stored(t, s); n != 0 {
		t.Fatalf("a dropped publish stored %d messages", n)
	}
	lose := natsfault.New(natsfault.Rates{LostAck: 1}, 1)
	if _, err := lose.Wrap(js).Publish(ctx, "t.a", []byte("x")); !errors.Is(err, natsfault.ErrInjected) {
		t.Fatalf("lost ack: %v", err)
	}
	f, err := lose.Wrap(js).PublishAsync("t.a", []byte("y"))
	if err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-f.Err():
		if !errors.Is(err, natsfault.ErrInjected) {
			t.Fatalf("lost async ack: %v", err)
		}
	case <-f.Ok():
		t.Fatal("a lost ack arrived")
	case <-time.After(10 * time.Second):
		t.Fatal("the lost async ack never resolved")
	}
	if n := stored(t, s); n != 2 {
		t.Fatalf("publishes with lost acks stored %d messages, want 2", n)
	}
	if c := drop.Counts(); c.PublishErrors != 2 || c.Total() != 2 {
		t.Errorf("drop counts %+v", c)
	}
	if c := lose.Counts(); c.LostAcks != 2 || c.Total() != 2 {
		t.Errorf("lose counts %+v", c)
	}
}

// A failed ack is not sent: the server delivers the message again.
func TestAckErrorRedelivers(t *testing.T) {
	js, _ := stream(t)
	ctx := context.Background()
	in := natsfault.New(natsfault.Rates{AckError: 1}, 1)
	if _, err := js.Publish(ctx, "t.a", []byte("x")); err != nil {
		t.Fatal(err)
	}
	c, err := in.Wrap(js).CreateOrUpdateConsumer(ctx, "T", jetstream.ConsumerConfig{Durable: "c",
		AckPolicy: jetstream.AckExplicitPolicy, AckWait: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	it, err := c.Messages()
	if err != nil {
		t.Fatal(err)
	}
	defer it.Stop()
	for i := 1; i <= 2; i++ {
		m, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		meta, _ := m.Metadata()
		if meta.NumDelivered != uint64(i) {
			t.Fatalf("delivery %d has count %d", i, meta.NumDelivered)
		}
		if err := m.Ack(); !errors.Is(err, natsfault.ErrInjected) {
			t.Fatalf("ack: %v", err)
		}
	}
	if c := in.Counts(); c.AckErrors != 2 {
		t.Errorf("counts %+v", c)
	}
}

// PublishFault hands out the publish faults at the injector's rates, and counts them with
// the wrapper's own.
func TestPublishFaultForOwnPublishers(t *testing.T) {
	in := natsfault.New(natsfault.Rates{PublishError: 0.2, LostAck: 0.2}, 7)
	var drops, lost int64
	for range 1000 {
		d, l := in.PublishFault()
		if d && l {
			t.Fatal("a publish both dropped and stored")
		}
		if d {
			drops++
		}
		if l {
			lost++
		}
	}
	c := in.Counts()
	if c.PublishErrors != drops || c.LostAcks != lost || drops < 120 || drops > 280 || lost < 100 || lost > 260 {
		t.Fatalf("%d dropped, %d lost of 1000; counted %+v", drops, lost, c)
	}
}
