package events_test

import (
	"context"
	"testing"

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
