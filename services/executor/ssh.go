package executor

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/gridwire/gridwire/pkg/cluster"
	"github.com/gridwire/gridwire/pkg/sshx"
)

// NewSSHPool is the connection pool of an ssh cluster: its login, its key file (none:
// the ssh-agent) and its known_hosts, checked for every connection.
func NewSSHPool(cl cluster.Cluster, log *slog.Logger) (*sshx.Pool, error) {
	cfg := sshx.Config{User: cl.User, KnownHostsFile: cl.KnownHosts, UseAgent: cl.Identity == ""}
	if cl.Identity != "" {
		cfg.IdentityFiles = []string{cl.Identity}
	}
	p, err := sshx.NewPool(cfg, log)
	if err != nil {
		return nil, fmt.Errorf("cluster %s: %w", cl.Name, err)
	}
	return p, nil
}

// SSHShell is a Shell on one remote host, over the pool's one connection to it: every
// call takes the pool's live client, so a connection that died is replaced.
type SSHShell struct {
	Pool *sshx.Pool
	Addr string // host[:port] as configured
}

// Host implements Shell.
func (s SSHShell) Host() string { return s.Addr }

// Run implements Shell.
func (s SSHShell) Run(ctx context.Context, script string) (Output, error) {
	c, err := s.Pool.Client(ctx, s.Addr)
	if err != nil {
		return Output{}, err
	}
	res, err := c.Run(ctx, script, nil)
	if err != nil {
		return Output{}, err
	}
	return Output{Stdout: res.Stdout, Stderr: res.Stderr, ExitCode: res.ExitCode, HostKey: c.HostKeyFingerprint()}, nil
}

// Feed implements Shell: the script goes in on the session's standard input, to a
// /bin/sh that the login shell becomes (exec), so the session costs one shell as Run's
// does.
func (s SSHShell) Feed(ctx context.Context, script string) (Output, error) {
	c, err := s.Pool.Client(ctx, s.Addr)
	if err != nil {
		return Output{}, err
	}
	res, err := c.Run(ctx, "exec /bin/sh -s", strings.NewReader(script))
	if err != nil {
		return Output{}, err
	}
	return Output{Stdout: res.Stdout, Stderr: res.Stderr, ExitCode: res.ExitCode, HostKey: c.HostKeyFingerprint()}, nil
}

// WriteFile implements Shell over SFTP: upload beside the target, then rename over it.
func (s SSHShell) WriteFile(ctx context.Context, p string, data []byte, mode os.FileMode) error {
	c, err := s.Pool.Client(ctx, s.Addr)
	if err != nil {
		return err
	}
	if err := c.MkdirAll(ctx, path.Dir(p)); err != nil {
		return err
	}
	tmp := p + ".tmp" + strconv.FormatInt(time.Now().UnixNano(), 36)
	if _, err := c.Upload(ctx, bytes.NewReader(data), tmp, mode); err != nil {
		return err
	}
	sc, err := c.SFTP(ctx)
	if err != nil {
		return err
	}
	if err := sc.PosixRename(tmp, p); err != nil {
		_ = sc.Remove(tmp)
		return fmt.Errorf("renaming %s on %s: %w", p, s.Addr, err)
	}
	return nil
}

// Exists implements Shell.
func (s SSHShell) Exists(ctx context.Context, p string) (bool, error) {
	c, err := s.Pool.Client(ctx, s.Addr)
	if err != nil {
		return false, err
	}
	sc, err := c.SFTP(ctx)
	if err != nil {
		return false, err
	}
	_, err = sc.Stat(p)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	return err == nil, err
}
