package ptp

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/gridwire/gridwire/events/eventstest"
)

// TestIDsDurableAndShared: two processes (two allocators on one bucket) never hand out
// the same offset, and a third, started later, finds every name where the others put it.
func TestIDsDurableAndShared(t *testing.T) {
	b, _ := eventstest.Open(t, "ids-test")
	ctx := context.Background()
	a, err := openIDs(ctx, b.JS)
	must(t, err)
	c, err := openIDs(ctx, b.JS)
	must(t, err)
	got := map[string]uint32{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for w, alloc := range []*ids{a, c} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 300; i++ {
				key := fmt.Sprintf("job-%d-%d", w, i)
				off, err := alloc.job(ctx, key, 3)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				got[key] = off
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	used := map[uint32]string{}
	for key, off := range got {
		for k := uint32(0); k < 4; k++ { // the job and its three processes
			if other, dup := used[off+k]; dup {
				t.Fatalf("offset %d given to %s and %s", off+k, other, key)
			}
			used[off+k] = key
		}
	}
	later, err := openIDs(ctx, b.JS)
	must(t, err)
	for key, off := range got {
		again, err := later.job(ctx, key, 3)
		must(t, err)
		if again != off {
			t.Fatalf("%s: %d after a restart, was %d", key, again, off)
		}
	}
	// Both allocators named the same host: the first Create wins for both.
	h1, err := a.named(ctx, "h", "local", "node1")
	must(t, err)
	h2, err := c.named(ctx, "h", "local", "node1")
	must(t, err)
	if h1 != h2 {
		t.Fatalf("one host, two offsets: %d and %d", h1, h2)
	}
}
