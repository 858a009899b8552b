package events_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/gridwire/gridwire/events"
)

// A pull that breaks under a running service (here its consumer is deleted outright) is
// started again: the service keeps consuming instead of returning.
func TestConsumeSurvivesABrokenPull(t *testing.T) {
	b, st := openStore(t)
	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	seen := map[string]bool{}
	done := make(chan error, 1)
	go func() {
		done <- events.Consume(ctx, b.JS, events.ConsumerSpec{Durable: "test", Filters: []string{events.TypeFilter(events.Submitted, "")}},
			func(_ context.Context, d events.Delivery) error {
				mu.Lock()
				seen[d.Event.JobID] = true
				mu.Unlock()
				return nil
			})
	}()
	waitSeen := func(id string) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			mu.Lock()
			ok := seen[id]
			mu.Unlock()
			if ok {
				return
			}
			select {
			case err := <-done:
				t.Fatalf("Consume returned %v while it should keep consuming", err)
			default:
			}
			if time.Now().After(deadline) {
				t.Fatalf("job %s was never handled", id)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	first := events.NewID()
	if _, err := st.Create(context.Background(), submitted(t, first)); err != nil {
		t.Fatal(err)
	}
	waitSeen(first)
	if err := b.JS.DeleteConsumer(context.Background(), events.Stream, "test"); err != nil {
		t.Fatal(err)
	}
	second := events.NewID()
	if _, err := st.Create(context.Background(), submitted(t, second)); err != nil {
		t.Fatal(err)
	}
	waitSeen(second)
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("clean shutdown returned %v", err)
	}
}

// A handler that works longer than the ack deadline keeps its delivery while the
// consumer's heartbeat beats; without one the server hands the event out again.
func TestConsumeHeartbeatKeepsADelivery(t *testing.T) {
	b, st := openStore(t)
	id := events.NewID()
	if _, err := st.Create(context.Background(), submitted(t, id)); err != nil {
		t.Fatal(err)
	}
	const ackWait = time.Second
	consume := func(durable string, heartbeat time.Duration, handler events.Handler) {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			done <- events.Consume(ctx, b.JS, events.ConsumerSpec{Durable: durable, Filters: []string{events.TypeFilter(events.Submitted, "")},
				AckWait: ackWait, Heartbeat: heartbeat}, handler)
		}()
		t.Cleanup(func() { cancel(); <-done })
	}

	// Without: the first delivery holds on until the server redelivers the event.
	redelivered := make(chan struct{})
	var once sync.Once
	consume("plain", 0, func(ctx context.Context, d events.Delivery) error {
		if d.Delivered > 1 {
			once.Do(func() { close(redelivered) })
			return nil
		}
		select {
		case <-redelivered:
		case <-time.After(30 * time.Second):
		}
		return nil
	})
	select {
	case <-redelivered:
	case <-time.After(30 * time.Second):
		t.Fatal("without a heartbeat the event was never redelivered while its handler worked")
	}

	// With: three ack deadlines of work, one delivery.
	var mu sync.Mutex
	var deliveries []uint64
	finished := make(chan struct{})
	consume("beating", ackWait/5, func(ctx context.Context, d events.Delivery) error {
		mu.Lock()
		deliveries = append(deliveries, d.Delivered)
		first := len(deliveries) == 1
		mu.Unlock()
		if first {
			time.Sleep(3 * ackWait)
			close(finished)
		}
		return nil
	})
	select {
	case <-finished:
	case <-time.After(30 * time.Second):
		t.Fatal("the handler never finished")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(deliveries) != 1 || deliveries[0] != 1 {
		t.Errorf("deliveries %v; want the one first delivery kept by the heartbeat", deliveries)
	}
}
