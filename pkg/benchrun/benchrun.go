// Package benchrun holds what benchmarks of several modules share for running work
// side by side with the tools they are compared against.
package benchrun

import (
	"sync"
	"testing"
	"time"
)

// Concurrently runs fn n times, workers at a time, and returns runs per second. An
// error from fn fails the benchmark without stopping the others.
func Concurrently(tb testing.TB, n, workers int, fn func() error) float64 {
	tb.Helper()
	start := time.Now()
	sem := make(chan struct{}, workers)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := fn(); err != nil {
				tb.Error(err)
			}
		}()
	}
	wg.Wait()
	return float64(n) / time.Since(start).Seconds()
}
