package ingest

import (
	"context"
	"net/http"
	"net/http/httptest"
	"runtime/metrics"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/events/eventstest"
	"github.com/gridwire/gridwire/pkg/httpapi"
)

// BenchmarkSubmitOneAtATime and BenchmarkSubmitBulk submit b.N small v3 jobs against an
// embedded JetStream on disk: one Submit per job from 64 goroutines, or SubmitAll of
// 1,000 from 4. Both store every submitted event before returning. The Signed variants
// sign as a deployed ingest does (one signature an event, or one a batch in bulk).
func BenchmarkSubmitOneAtATime(b *testing.B)       { benchSubmitOne(b, benchService(b, false)) }
func BenchmarkSubmitOneAtATimeSigned(b *testing.B) { benchSubmitOne(b, benchService(b, true)) }
func BenchmarkSubmitBulk(b *testing.B)             { benchSubmitBulk(b, benchService(b, false)) }
func BenchmarkSubmitBulkSigned(b *testing.B)       { benchSubmitBulk(b, benchService(b, true)) }

func benchSubmitOne(b *testing.B, svc *Service) {
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

func benchSubmitBulk(b *testing.B, svc *Service) {
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
	start, gcStart := cpu(), gcCPU()
	return func() {
		b.ReportMetric(float64((cpu()-start).Microseconds())/float64(b.N), "cpu-us/op")
		b.ReportMetric((gcCPU()-gcStart)*1e6/float64(b.N), "gc-cpu-us/op")
	}
}

// gcCPU is the runtime's estimate of the CPU seconds the collector has used so far.
func gcCPU() float64 {
	s := []metrics.Sample{{Name: "/cpu/classes/gc/total:cpu-seconds"}}
	metrics.Read(s)
	return s[0].Value.Float64()
}

// benchService is a service on an embedded JetStream, signing with a fresh ingest key
// when signed.
func benchService(b *testing.B, signed bool) *Service {
	bus, st := eventstest.Open(b, "bench/ingest")
	if signed {
		seed, err := events.NewSeed()
		if err != nil {
			b.Fatal(err)
		}
		key, err := events.NewSigningKey(seed, events.Grant{Role: events.RoleIngest})
		if err != nil {
			b.Fatal(err)
		}
		st = events.NewStore(bus.Conn, bus.JS, events.SourcePrefix+"ingest/bench", events.WithSigningKey(key))
	}
	svc, err := New(Config{}, Deps{Store: st})
	if err != nil {
		b.Fatal(err)
	}
	return svc
}

// BenchmarkSubmitPrepare is ingest's own share of a durable submit, without the store:
// parsing, validating, linking and encoding one small v3 job (prepare, as SubmitAll does
// for each item), on one goroutine.
func BenchmarkSubmitPrepare(b *testing.B) {
	svc, err := New(Config{}, Deps{Store: &memStore{}})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	sub := Submission{File: "bench.json", Data: []byte(`{"version":3,"executable":"/bin/true"}`), Submitter: "bench"}
	b.ReportAllocs()
	defer reportCPU(b)()
	for b.Loop() {
		if _, err := svc.prepare(ctx, sub); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBulkResults writes the answer to a bulk submission of 1,000 accepted items
// (one job each) directly (writeResults) and with httpapi.WriteJSON, the yardstick;
// per item.
func BenchmarkBulkResults(b *testing.B) {
	results := make([]Result, 1000)
	for i := range results {
		results[i] = Result{Index: i, Status: http.StatusCreated, Jobs: []string{events.NewID()}}
	}
	for _, c := range []struct {
		name  string
		write func(http.ResponseWriter)
	}{
		{"direct", func(w http.ResponseWriter) { writeResults(w, results) }},
		{"WriteJSON", func(w http.ResponseWriter) {
			httpapi.WriteJSON(w, http.StatusOK, struct {
				Results []Result `json:"results"`
			}{results})
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			defer reportCPU(b)()
			for b.Loop() {
				c.write(httptest.NewRecorder())
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(results)), "ns/item")
		})
	}
}
