package watcher

import (
	"context"
	"fmt"
	"log/slog"
	"slices"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/pkg/cluster"
	"github.com/gridwire/gridwire/pkg/sshx"
)

// SSHRunner runs probe scripts on one host over the pool's connection to it, with the
// host key checked against the cluster's known_hosts.
type SSHRunner struct {
	Pool *sshx.Pool
	Addr string
}

// Run implements Runner.
func (r SSHRunner) Run(ctx context.Context, script string) ([]byte, int, error) {
	c, err := r.Pool.Client(ctx, r.Addr)
	if err != nil {
		return nil, 0, err
	}
	res, err := c.Run(ctx, script, nil)
	if err != nil {
		return nil, 0, err
	}
	return res.Stdout, res.ExitCode, nil
}

// NewSSHProber observes an ssh cluster's jobs: one remote command per host and poll
// for all of that host's jobs (the profile's GET_JOB_STATUS and the exit status files),
// over one pooled connection per host. A job is asked about on the host its started
// event names; one whose host is not among the cluster's (the config changed) is asked
// on the first host.
func NewSSHProber(cl cluster.Cluster, lookup func(context.Context, string) (events.State, error), maxCallsPerMinute int, log *slog.Logger) (*ScriptProber, func(), error) {
	if len(cl.Hosts) == 0 {
		return nil, nil, fmt.Errorf("watcher: cluster %s: kind ssh needs hosts", cl.Name)
	}
	cfg := sshx.Config{User: cl.User, KnownHostsFile: cl.KnownHosts, UseAgent: cl.Identity == ""}
	if cl.Identity != "" {
		cfg.IdentityFiles = []string{cl.Identity}
	}
	pool, err := sshx.NewPool(cfg, log)
	if err != nil {
		return nil, nil, fmt.Errorf("watcher: cluster %s: %w", cl.Name, err)
	}
	p := &ScriptProber{Cluster: cl.Name, Lookup: lookup, MaxCallsPerMinute: maxCallsPerMinute, Logger: log,
		Runner: func(host string) Runner {
			if !slices.Contains(cl.Hosts, host) {
				host = cl.Hosts[0]
			}
			return SSHRunner{Pool: pool, Addr: host}
		}}
	return p, func() { _ = pool.Close() }, nil
}
