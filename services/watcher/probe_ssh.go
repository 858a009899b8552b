package watcher

import (
	"context"
	"fmt"
	"log/slog"
	"slices"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/pkg/cluster"
	"github.com/gridwire/gridwire/pkg/target"
)

// NewSSHProber observes an ssh cluster's jobs: one remote command per host and poll
// for all of that host's jobs (the profile's GET_JOB_STATUS and the exit status files),
// over one pooled connection per host, with host keys checked against the cluster's
// known_hosts. A job is asked about on the host its started event names; one whose host
// is not among the cluster's (the config changed) is asked on the first host.
func NewSSHProber(cl cluster.Cluster, lookup func(context.Context, string) (events.State, error), maxCallsPerMinute int, log *slog.Logger) (*ScriptProber, func(), error) {
	if len(cl.Hosts) == 0 {
		return nil, nil, fmt.Errorf("watcher: cluster %s: kind ssh needs hosts", cl.Name)
	}
	pool, err := target.NewPool(cl, log)
	if err != nil {
		return nil, nil, fmt.Errorf("watcher: %w", err)
	}
	p := &ScriptProber{Cluster: cl.Name, Lookup: lookup, MaxCallsPerMinute: maxCallsPerMinute, Logger: log,
		Runner: func(host string) Runner {
			if !slices.Contains(cl.Hosts, host) {
				host = cl.Hosts[0]
			}
			return target.SSH{Pool: pool, Addr: host}
		}}
	return p, func() { _ = pool.Close() }, nil
}
