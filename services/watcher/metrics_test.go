package watcher

import (
	"context"
	"testing"
	"time"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/pkg/cluster"
	"github.com/prometheus/client_golang/prometheus"
)

// counter is the value of a counter of reg with the given cluster label, -1 if absent.
func counter(t *testing.T, reg *prometheus.Registry, name, cluster string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "cluster" && l.GetValue() == cluster {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return -1
}

// The watcher counts each cluster's status polls and failed polls in the registerer it
// is given.
func TestPollMetrics(t *testing.T) {
	b, st := openBus(t)
	p := &flakyProber{}
	p.down.Store(true)
	reg := prometheus.NewRegistry()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	cfg := Config{Clusters: []cluster.Cluster{{Name: "hpc1", Kind: cluster.KindSSH}},
		PollMin: 5 * time.Millisecond, PollMax: 10 * time.Millisecond}
	go func() {
		done <- Run(ctx, cfg, Deps{JS: b.JS, Conn: b.Conn, Store: st, Logger: nopLog(),
			Probers: map[string]Prober{"hpc1": p}, Metrics: reg})
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("stopping: %v", err)
		}
	}()
	id := events.NewID()
	play(t, st, id, time.Now(), life(id, "hpc1", 0)[:7])
	eventually(t, "three failed polls counted", func() bool {
		return counter(t, reg, "gridwire_status_poll_failures_total", "hpc1") >= 3
	})
	p.down.Store(false)
	failed := counter(t, reg, "gridwire_status_poll_failures_total", "hpc1")
	eventually(t, "a poll that answers", func() bool {
		return counter(t, reg, "gridwire_status_polls_total", "hpc1") > failed+3
	})
	if n := counter(t, reg, "gridwire_status_poll_failures_total", "hpc1"); n > failed+1 {
		t.Fatalf("%v failed polls after the target answers again, want at most %v (one in flight)", n, failed+1)
	}
}
