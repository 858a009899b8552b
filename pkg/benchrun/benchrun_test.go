package benchrun

import (
	"sync/atomic"
	"testing"
	"time"
)

func TestConcurrentlyRunsEveryCallWithinItsBound(t *testing.T) {
	var calls, running, most atomic.Int32
	rate := Concurrently(t, 40, 3, func() error {
		calls.Add(1)
		n := running.Add(1)
		for {
			m := most.Load()
			if n <= m || most.CompareAndSwap(m, n) {
				break
			}
		}
		time.Sleep(time.Millisecond)
		running.Add(-1)
		return nil
	})
	if calls.Load() != 40 || most.Load() > 3 || most.Load() < 1 || rate <= 0 {
		t.Fatalf("calls %d, most at once %d, rate %v; want 40, 1..3, > 0", calls.Load(), most.Load(), rate)
	}
}
