package target

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/gridwire/gridwire/pkg/cluster"
	"github.com/gridwire/gridwire/pkg/sshx"
)

// Login is how gridwire logs in to SSH hosts: the remote user, a private key file (none:
// the keys of the ssh-agent) and the known_hosts file every host key is checked against.
// It is comparable, so one pool can serve every use of the same login.
type Login struct {
	User, Identity, KnownHosts string
}

// ClusterLogin is the login a cluster's config names for its hosts.
func ClusterLogin(cl cluster.Cluster) Login {
	return Login{User: cl.User, Identity: cl.Identity, KnownHosts: cl.KnownHosts}
}

// Config is the pool configuration of the login; other fields take sshx's defaults.
func (l Login) Config() sshx.Config {
	cfg := sshx.Config{User: l.User, KnownHostsFile: l.KnownHosts, UseAgent: l.Identity == ""}
	if l.Identity != "" {
		cfg.IdentityFiles = []string{l.Identity}
	}
	return cfg
}

// NewPool is the connection pool of a cluster's hosts, one verified connection per host.
func NewPool(cl cluster.Cluster, log *slog.Logger) (*sshx.Pool, error) {
	p, err := sshx.NewPool(ClusterLogin(cl).Config(), log)
	if err != nil {
		return nil, fmt.Errorf("cluster %s: %w", cl.Name, err)
	}
	return p, nil
}

// SSH runs scripts on one remote host over the pool's one connection to it: every call
// takes the pool's live client, so a connection that died is replaced.
type SSH struct {
	Pool *sshx.Pool
	Addr string // host[:port] as configured
}

// Host is the host as the cluster's config names it.
func (s SSH) Host() string { return s.Addr }

// Run runs script as one command of the remote user's login shell. A non-zero exit is
// an Output, not an error; errors are transport failures (see sshx.Client.Run).
func (s SSH) Run(ctx context.Context, script string) (Output, error) {
	return s.run(ctx, script, nil)
}

// Feed runs script by feeding it on the session's standard input to a /bin/sh that the
// login shell becomes (exec), so its size is not bound by the remote limit on an
// argument and the session costs one shell as Run's does.
func (s SSH) Feed(ctx context.Context, script string) (Output, error) {
	return s.run(ctx, "exec /bin/sh -s", strings.NewReader(script))
}

// Stream is Feed with the script's standard output written as it comes instead of kept
// in the Output (whose Stdout is then nil). stdout is called once, before the script
// runs, with the fingerprint of the host key the connection it runs over was verified
// by, and returns the writer of the output. Every write has happened when Stream
// returns, except when ctx ended first (see sshx.Client.RunTo).
func (s SSH) Stream(ctx context.Context, script string, stdout func(hostKey string) io.Writer) (Output, error) {
	c, err := s.Pool.Client(ctx, s.Addr)
	if err != nil {
		return Output{}, err
	}
	key := c.HostKeyFingerprint()
	res, err := c.RunTo(ctx, "exec /bin/sh -s", strings.NewReader(script), stdout(key))
	if err != nil {
		return Output{}, err
	}
	return Output{Stderr: res.Stderr, ExitCode: res.ExitCode, HostKey: key}, nil
}

func (s SSH) run(ctx context.Context, command string, stdin io.Reader) (Output, error) {
	c, err := s.Pool.Client(ctx, s.Addr)
	if err != nil {
		return Output{}, err
	}
	res, err := c.Run(ctx, command, stdin)
	if err != nil {
		return Output{}, err
	}
	return Output{Stdout: res.Stdout, Stderr: res.Stderr, ExitCode: res.ExitCode, HostKey: c.HostKeyFingerprint()}, nil
}

// Forward makes a loopback port on the host whose connections come back over the pool's
// connection to dial (sshx.Client.Forward), and returns its address there.
func (s SSH) Forward(ctx context.Context, dial sshx.Dialer) (string, error) {
	c, err := s.Pool.Client(ctx, s.Addr)
	if err != nil {
		return "", err
	}
	return c.Forward(ctx, dial)
}
