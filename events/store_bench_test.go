package events_test

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gridwire/gridwire/events"
)

// fill creates n jobs with a few events each, so loads run against a realistic stream.
func fill(b *testing.B, st *events.Store, n int) []string {
	ctx := context.Background()
	ids := make([]string, n)
	for i := range ids {
		ids[i] = events.NewID()
		e, _ := events.New(ids[i], events.Submitted, "", t0, events.Job{ID: ids[i], Executable: "/bin/true"})
		if _, err := st.Create(ctx, e); err != nil {
			b.Fatal(err)
		}
	}
	for _, id := range ids {
		if _, err := st.Decide(ctx, id, func(s events.State) ([]events.Event, error) {
			e, err := events.New(id, events.Incarnated, "", t0, events.IncarnatedData{Cluster: "local"})
			return []events.Event{e}, err
		}); err != nil {
			b.Fatal(err)
		}
	}
	return ids
}

func BenchmarkLoad(b *testing.B) {
	_, st := openStoreB(b)
	ids := fill(b, st, 5000)
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		h, err := st.Load(ctx, ids[i%len(ids)])
		if err != nil || len(h.Events) != 2 {
			b.Fatalf("%v %d", err, len(h.Events))
		}
	}
}

func BenchmarkDecideAppend(b *testing.B) {
	_, st := openStoreB(b)
	ids := fill(b, st, 5000)
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		id := ids[i%len(ids)]
		if _, err := st.Decide(ctx, id, func(s events.State) ([]events.Event, error) {
			e, err := events.New(id, events.HoldRequested, "", t0, events.Note{})
			return []events.Event{e}, err
		}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCreate(b *testing.B) {
	_, st := openStoreB(b)
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		id := events.NewID()
		e, _ := events.New(id, events.Submitted, "", t0, events.Job{ID: id, Executable: "/bin/true"})
		if _, err := st.Create(ctx, e); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReadJob reads one job's stored events, at random among 20,000 jobs of two
// events each, as the read API does: through its links with the subject count
// (Stored), and, the way the API read before, by a scan of the stream for the job's
// subjects from the first sequence (Scan).
func BenchmarkReadJob(b *testing.B) {
	_, st := openStoreB(b)
	ids := fill(b, st, 20000)
	ctx := context.Background()
	b.Run("Stored", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			if evs, err := st.Stored(ctx, ids[(i*7919)%len(ids)]); err != nil || len(evs) != 2 {
				b.Fatalf("%v %d", err, len(evs))
			}
		}
	})
	b.Run("Scan", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			if evs, _, err := st.Scan(ctx, events.JobFilter(ids[(i*7919)%len(ids)]), 1, 1024); err != nil || len(evs) != 2 {
				b.Fatalf("%v %d", err, len(evs))
			}
		}
	})
}

// BenchmarkCreateSigned is Create with an ingest key, as one submission a request
// appends: from one caller at a time (Serial) and from 32 at once (Parallel, as the
// bench's submit row and a busy HTTP endpoint do). cpu-ns/op is the process's CPU per
// append, the embedded server's included; sigs/event is how many ed25519 signatures
// the stored events carry per event.
func BenchmarkCreateSigned(b *testing.B) {
	for _, conc := range []int{1, 32} {
		b.Run(concName(conc), func(b *testing.B) {
			bs, _ := openStoreB(b)
			st := events.NewStore(bs.Conn, bs.JS, "gridwire/ingest/bench", events.WithSigningKey(signingKey(b, events.Grant{Role: events.RoleIngest})))
			ctx := context.Background()
			runConcurrently(b, conc, func(int) error {
				id := events.NewID()
				e, _ := events.New(id, events.Submitted, "", t0, events.Job{ID: id, Executable: "/bin/true"})
				_, err := st.Create(ctx, e)
				return err
			})
			reportSignatures(b, st)
		})
	}
}

// BenchmarkDecideAppendSigned is Decide appending one event with a watcher key on one
// of 2,000 jobs, from one caller at a time and from 32 at once (each on jobs of its
// own: the appends do not conflict), as a service's workers decide.
//
// Pipe is the store's own publishing (append_pipe.go); JetStream is jetstream's
// PublishMsg, as every single append published before (WithJetStreamPublish).
func BenchmarkDecideAppendSigned(b *testing.B) {
	for _, via := range []string{"Pipe", "JetStream"} {
		for _, conc := range []int{1, 32} {
			b.Run(via+"/"+concName(conc), func(b *testing.B) { benchDecideAppendSigned(b, via, conc) })
		}
	}
}

func benchDecideAppendSigned(b *testing.B, via string, conc int) {
	{
		{
			bs, unsigned := openStoreB(b)
			ids := fill(b, unsigned, 2048)
			opts := []events.StoreOption{events.WithSigningKey(signingKey(b, events.Grant{Role: events.RoleWatcher}))}
			if via == "JetStream" {
				opts = append(opts, events.WithJetStreamPublish())
			}
			st := events.NewStore(bs.Conn, bs.JS, "gridwire/watcher/bench", opts...)
			ctx := context.Background()
			var turns [32]int
			runConcurrently(b, conc, func(worker int) error {
				id := ids[worker+conc*(turns[worker]%(len(ids)/conc))]
				turns[worker]++
				_, err := st.Decide(ctx, id, func(s events.State) ([]events.Event, error) {
					e, err := events.New(id, events.HoldRequested, "", t0, events.Note{})
					return []events.Event{e}, err
				})
				return err
			})
			reportSignatures(b, st)
		}
	}
}

func concName(conc int) string {
	if conc == 1 {
		return "Serial"
	}
	return "Parallel"
}

// runConcurrently calls op b.N times in all from conc goroutines (worker numbers 0 to
// conc-1) and reports the process's CPU per call.
func runConcurrently(b *testing.B, conc int, op func(worker int) error) {
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, conc)
	cpu0 := processCPU()
	b.ResetTimer()
	for w := range conc {
		wg.Go(func() {
			for next.Add(1) <= int64(b.N) && errs[w] == nil {
				errs[w] = op(w)
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	for _, err := range errs {
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op")
}

// processCPU is the user and system CPU this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportSignatures reports how many distinct ed25519 signatures the signed events of
// the stream carry, per signed event (1: each its own; 1/n: n events a signature).
func reportSignatures(b *testing.B, st *events.Store) {
	b.Helper()
	ctx := context.Background()
	sigs, signed := map[string]bool{}, 0
	for from := uint64(1); ; {
		evs, more, err := st.ReadRange(ctx, from, 1024)
		if err != nil {
			b.Fatal(err)
		}
		for _, e := range evs {
			if e.Signature != "" {
				sigs[strings.SplitN(e.Signature, ".", 2)[0]] = true
				signed++
			}
			from = e.Seq + 1
		}
		if !more || len(evs) == 0 {
			break
		}
	}
	if signed > 0 {
		b.ReportMetric(float64(len(sigs))/float64(signed), "sigs/event")
	}
}

// BenchmarkAppendSigned is the single conditional append alone, signed with a watcher
// key: each worker appends to a job of its own, conditioned on the sequence its last
// append returned, so no read is made. Pipe publishes through the store's own pipe,
// JetStream through jetstream's PublishMsg (WithJetStreamPublish), as single appends
// did before.
func BenchmarkAppendSigned(b *testing.B) {
	for _, via := range []string{"Pipe", "JetStream"} {
		for _, conc := range []int{1, 32} {
			b.Run(via+"/"+concName(conc), func(b *testing.B) {
				bs, unsigned := openStoreB(b)
				opts := []events.StoreOption{events.WithSigningKey(signingKey(b, events.Grant{Role: events.RoleWatcher}))}
				if via == "JetStream" {
					opts = append(opts, events.WithJetStreamPublish())
				}
				st := events.NewStore(bs.Conn, bs.JS, "gridwire/watcher/bench", opts...)
				ctx := context.Background()
				ids, last := make([]string, conc), make([]uint64, conc)
				for w := range conc {
					ids[w] = events.NewID()
					e, _ := events.New(ids[w], events.Submitted, "", t0, events.Job{ID: ids[w], Executable: "/bin/true"})
					seq, err := unsigned.Create(ctx, e)
					if err != nil {
						b.Fatal(err)
					}
					last[w] = seq
				}
				runConcurrently(b, conc, func(w int) error {
					e, err := events.New(ids[w], events.HoldRequested, "", t0, events.Note{})
					if err != nil {
						return err
					}
					last[w], err = st.Append(ctx, last[w], "", e)
					return err
				})
			})
		}
	}
}
