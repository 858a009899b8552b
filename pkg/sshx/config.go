// Package sshx is gridwire's SSH layer: a pool of verified, kept-alive connections, one
// per host, over which the executor runs scripts and the stager moves files by SFTP.
//
// sshx owns host-key verification (known_hosts only; unknown, changed and revoked keys are
// refused with the presented key's fingerprint), authentication by key files and
// ssh-agent, connection reuse, keep-alives and reconnection with backoff. It does not own
// what runs remotely (the executor renders scripts, quoted with pkg/shellquote) nor retry
// budgets for transfers (the stager's); it reports transport failures and lets callers
// decide.
package sshx

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"time"
)

// Defaults applied by NewPool to zero fields of Config.
const (
	DefaultDialTimeout        = 15 * time.Second
	DefaultKeepAlive          = 30 * time.Second
	DefaultMaxSessionsPerConn = 8
	DefaultBackoffInitial     = 250 * time.Millisecond
	DefaultBackoffMax         = 30 * time.Second
)

// Config is how a Pool connects: plain data. Zero fields take defaults, except that
// something to authenticate with (IdentityFiles or UseAgent) is required; Validate says
// what is missing.
type Config struct {
	// User is the remote login name; empty means the local user ($USER, else the
	// account running the process).
	User string
	// IdentityFiles are unencrypted private key files (OpenSSH or PEM; ed25519, RSA,
	// ECDSA). Encrypted keys are refused: load them into an ssh-agent instead.
	IdentityFiles []string
	// UseAgent offers the keys of the ssh-agent at $SSH_AUTH_SOCK, after IdentityFiles.
	UseAgent bool
	// KnownHostsFile is the OpenSSH known_hosts file host keys are checked against; empty
	// means ~/.ssh/known_hosts. It is read again for every new connection, so an
	// operator's edit takes effect without a restart.
	KnownHostsFile string
	// DialTimeout bounds the TCP connect plus the SSH handshake.
	DialTimeout time.Duration
	// KeepAlive is the interval of keepalive@openssh.com requests; a connection whose
	// peer leaves one unanswered for 3 intervals is closed. Negative disables them.
	KeepAlive time.Duration
	// MaxSessionsPerConn caps the concurrent sessions (commands plus the SFTP
	// subsystem) on one connection; keep it below the server's MaxSessions (OpenSSH: 10).
	MaxSessionsPerConn int
	// BackoffInitial and BackoffMax shape the exponential backoff (with jitter) between
	// failed connection attempts to one host.
	BackoffInitial, BackoffMax time.Duration
	// InsecureIgnoreHostKey accepts any host key without checking known_hosts. It exists
	// for tests only and must be set explicitly; a Pool with it logs a warning on every
	// connection. Never set it from operator configuration.
	InsecureIgnoreHostKey bool
	// Dial, when set, makes the TCP connections instead of a net.Dialer (a caller that
	// checks every address it connects to: the stager's network policy).
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

// ErrConfig marks an invalid Config.
var ErrConfig = errors.New("sshx: invalid config")

// Validate reports the first thing wrong with c, naming the field.
func (c Config) Validate() error {
	if len(c.IdentityFiles) == 0 && !c.UseAgent {
		return fmt.Errorf("%w: IdentityFiles: no key files and UseAgent is false: nothing to authenticate with", ErrConfig)
	}
	if c.UseAgent && os.Getenv("SSH_AUTH_SOCK") == "" && len(c.IdentityFiles) == 0 {
		return fmt.Errorf("%w: UseAgent: SSH_AUTH_SOCK is not set", ErrConfig)
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"DialTimeout", c.DialTimeout}, {"BackoffInitial", c.BackoffInitial}, {"BackoffMax", c.BackoffMax}} {
		if d.v < 0 {
			return fmt.Errorf("%w: %s: %v is negative", ErrConfig, d.name, d.v)
		}
	}
	if c.MaxSessionsPerConn < 0 {
		return fmt.Errorf("%w: MaxSessionsPerConn: %d is negative", ErrConfig, c.MaxSessionsPerConn)
	}
	return nil
}

// withDefaults returns c with zero fields set to their defaults.
func (c Config) withDefaults() (Config, error) {
	if c.User == "" {
		c.User = os.Getenv("USER")
	}
	if c.User == "" {
		if u, err := user.Current(); err == nil {
			c.User = u.Username
		}
	}
	if c.User == "" {
		return c, fmt.Errorf("%w: User: empty and the local user is unknown", ErrConfig)
	}
	if c.KnownHostsFile == "" && !c.InsecureIgnoreHostKey {
		home, err := os.UserHomeDir()
		if err != nil {
			return c, fmt.Errorf("%w: KnownHostsFile: empty and no home directory: %v", ErrConfig, err)
		}
		c.KnownHostsFile = filepath.Join(home, ".ssh", "known_hosts")
	}
	if c.DialTimeout == 0 {
		c.DialTimeout = DefaultDialTimeout
	}
	if c.KeepAlive == 0 {
		c.KeepAlive = DefaultKeepAlive
	}
	if c.MaxSessionsPerConn == 0 {
		c.MaxSessionsPerConn = DefaultMaxSessionsPerConn
	}
	if c.BackoffInitial == 0 {
		c.BackoffInitial = DefaultBackoffInitial
	}
	if c.BackoffMax == 0 {
		c.BackoffMax = DefaultBackoffMax
	}
	if c.BackoffMax < c.BackoffInitial {
		c.BackoffMax = c.BackoffInitial
	}
	return c, nil
}
