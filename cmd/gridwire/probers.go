package main

import (
	"context"
	"log/slog"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/pkg/cluster"
	"github.com/gridwire/gridwire/services/watcher"
)

// probeSettings is what the watcher section of the config says about polling targets.
type probeSettings struct {
	// MaxCallsPerMinute caps status calls per cluster (watcher: max_calls_per_minute).
	MaxCallsPerMinute int `yaml:"max_calls_per_minute"`
}

// probers builds the watcher's prober for every cluster that is not a plain fork
// cluster (the watcher makes those itself); the returned func closes their connections.
func (s *system) probers(clusters []cluster.Cluster, lookup func(context.Context, string) (events.State, error), log *slog.Logger) (map[string]watcher.Prober, func(), error) {
	var settings probeSettings // 0: the watcher's default for each cluster's kind
	if err := s.cfg.DecodeSection("watcher", s.cfg.Watcher, &settings); err != nil {
		return nil, nil, err
	}
	out := map[string]watcher.Prober{}
	var closers []func()
	closeAll := func() {
		for _, c := range closers {
			c()
		}
	}
	for _, cl := range clusters {
		p, closeFn, err := watcher.NewProber(cl, lookup, settings.MaxCallsPerMinute, log.With("cluster", cl.Name))
		if err != nil {
			closeAll()
			return nil, nil, err
		}
		closers = append(closers, closeFn)
		out[cl.Name] = p
	}
	return out, closeAll, nil
}
