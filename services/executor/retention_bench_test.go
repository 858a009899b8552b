package executor

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/gridwire/gridwire/events"
)

// BenchmarkRetentionRemovals: b.N jobs that ended on a fork cluster with retention 0 are
// removed (the default rm -rf of a directory holding a file) and recorded, by one
// executor that starts after they ended: the schedule's consumer, the claim, the removal
// and the conditional append per job.
func BenchmarkRetentionRemovals(b *testing.B) {
	e := newEnv(b)
	cfg, root := retained(b, 0)
	ids := make([]string, b.N)
	for i := range ids {
		ids[i] = events.NewID()
		e.ended("local", filepath.Join(root, ids[i]), "")
	}
	b.ResetTimer()
	start := time.Now()
	e.run(cfg, &ForkTarget{Cluster: "local"})
	for _, id := range ids {
		e.waitFor(id, "directory_deleted", deletedFact)
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "removals/s")
}

// BenchmarkRetentionSweepWaiting is one sweep over a schedule of 100,000 attempts that
// are not due yet: what keeping a long retention's schedule costs a sweep (no log reads).
func BenchmarkRetentionSweepWaiting(b *testing.B) {
	const entries = 100_000
	now := time.Now()
	s := &sweeper{x: &executor{deps: Deps{Now: func() time.Time { return now }}},
		due: make(map[string]dueEntry, entries)}
	for range entries {
		s.due[dueKey("local", events.NewID(), 1)] = dueEntry{Attempt: 1, at: now.Add(time.Hour)}
	}
	b.ResetTimer()
	for range b.N {
		if s.sweep(context.Background()) {
			b.Fatal("a waiting attempt was read")
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/entries, "ns/entry")
}
