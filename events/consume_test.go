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
