package watcher

import (
	"context"
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// pollMetrics count status polls and their failures per cluster.
type pollMetrics struct {
	polls, failures *prometheus.CounterVec
}

// newPollMetrics registers the poll counters with reg; counters reg already holds (a
// watcher of this process registered them before) are shared. A nil reg counts nothing.
func newPollMetrics(reg prometheus.Registerer) (*pollMetrics, error) {
	if reg == nil {
		return nil, nil
	}
	polls, err := register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gridwire_status_polls_total", Help: "Status polls of a cluster's jobs (one per batch).",
	}, []string{"cluster"}))
	if err != nil {
		return nil, err
	}
	failures, err := register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gridwire_status_poll_failures_total", Help: "Status polls that failed (status_unknown).",
	}, []string{"cluster"}))
	if err != nil {
		return nil, err
	}
	return &pollMetrics{polls: polls, failures: failures}, nil
}

func register(reg prometheus.Registerer, c *prometheus.CounterVec) (*prometheus.CounterVec, error) {
	err := reg.Register(c)
	var already prometheus.AlreadyRegisteredError
	switch {
	case errors.As(err, &already):
		if existing, ok := already.ExistingCollector.(*prometheus.CounterVec); ok {
			return existing, nil
		}
		return nil, fmt.Errorf("watcher: registering metrics: %w", err)
	case err != nil:
		return nil, fmt.Errorf("watcher: registering metrics: %w", err)
	}
	return c, nil
}

// count wraps a cluster's prober to count its polls and failures.
func (m *pollMetrics) count(cluster string, p Prober) Prober {
	if m == nil {
		return p
	}
	return countingProber{p: p, calls: m.polls.WithLabelValues(cluster), failures: m.failures.WithLabelValues(cluster)}
}

type countingProber struct {
	p               Prober
	calls, failures prometheus.Counter
}

func (c countingProber) Probe(ctx context.Context, jobs []Watched) (map[string]Observation, error) {
	c.calls.Inc()
	obs, err := c.p.Probe(ctx, jobs)
	if err != nil {
		c.failures.Inc()
	}
	return obs, err
}
