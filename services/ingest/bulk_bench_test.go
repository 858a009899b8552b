package ingest

import (
	"context"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gridwire/gridwire/events/eventstest"
)

// BenchmarkSubmitOneAtATime and BenchmarkSubmitBulk submit b.N small v3 jobs against an
// embedded JetStream on disk: one Submit per job from 64 goroutines, or SubmitAll of
// 1,000 from 4. Both store every submitted event before returning.
func BenchmarkSubmitOneAtATime(b *testing.B) {
	svc := benchService(b)
	ctx := context.Background()
	sub := Submission{File: "bench.json", Data: []byte(`{"version":3,"executable":"/bin/true"}`), Submitter: "bench"}
	b.SetParallelism(32)
	b.ResetTimer()
	defer reportCPU(b)()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := svc.Submit(ctx, sub); err != nil {
				b.Error(err)
			}
		}
	})
}

func BenchmarkSubmitBulk(b *testing.B) {
	svc := benchService(b)
	ctx := context.Background()
	sub := Submission{File: "bench.json", Data: []byte(`{"version":3,"executable":"/bin/true"}`), Submitter: "bench"}
	b.ResetTimer()
	defer reportCPU(b)()
	var wg sync.WaitGroup
	work := make(chan int)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range work {
				subs := make([]Submission, n)
				for i := range subs {
					subs[i] = sub
				}
				for _, r := range svc.SubmitAll(ctx, subs) {
					if r.Error != nil {
						b.Error(r.Error)
					}
				}
			}
		}()
	}
	for left := b.N; left > 0; left -= 1000 {
		work <- min(left, 1000)
	}
	close(work)
	wg.Wait()
}

// reportCPU reports the process's CPU time per op (this process runs the embedded
// server too: the whole cost of a durable submit), which a loaded machine's wall clock
// does not show.
func reportCPU(b *testing.B) func() {
	cpu := func() time.Duration {
		var ru syscall.Rusage
		_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	start := cpu()
	return func() { b.ReportMetric(float64((cpu()-start).Microseconds())/float64(b.N), "cpu-us/op") }
}

func benchService(b *testing.B) *Service {
	_, st := eventstest.Open(b, "bench/ingest")
	svc, err := New(Config{}, Deps{Store: st})
	if err != nil {
		b.Fatal(err)
	}
	return svc
}
