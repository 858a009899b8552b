package stager

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path"
	"sort"
	"strings"
	"sync"

	"github.com/gridwire/gridwire/pkg/sshx"
	"github.com/gridwire/gridwire/pkg/target"
	"github.com/pkg/sftp"
)

// sshPools keeps one sshx.Pool per login, so connections are shared by every transfer.
// The pools of hosts that jobs name (sftp and scp URLs) dial through the network policy;
// those of the operator's clusters do not.
type sshPools struct {
	logger *slog.Logger
	dial   func(ctx context.Context, network, addr string) (net.Conn, error) // the policy's
	mu     sync.Mutex
	pools  map[poolKey]*sshx.Pool
}

type poolKey struct {
	login   target.Login
	policed bool // a job named the host: its connections go through dial
}

func newSSHPools(logger *slog.Logger, dial func(ctx context.Context, network, addr string) (net.Conn, error)) *sshPools {
	return &sshPools{logger: logger, dial: dial, pools: map[poolKey]*sshx.Pool{}}
}

// sftp returns the shared SFTP client of the connection to host[:port] with the login
// (not to be closed). policed says a job named the host, so the network policy applies.
func (p *sshPools) sftp(ctx context.Context, host string, l target.Login, policed bool) (*sftp.Client, error) {
	pool, err := p.pool(poolKey{l, policed})
	if err != nil {
		return nil, err
	}
	c, err := pool.Client(ctx, host)
	if err != nil {
		return nil, err
	}
	return c.SFTP(ctx)
}

func (p *sshPools) pool(k poolKey) (*sshx.Pool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if pool, ok := p.pools[k]; ok {
		return pool, nil
	}
	cfg := k.login.Config()
	if k.policed {
		cfg.Dial = p.dial
	}
	pool, err := sshx.NewPool(cfg, p.logger)
	if err != nil {
		return nil, err
	}
	p.pools[k] = pool
	return pool, nil
}

// Close closes every pool.
func (p *sshPools) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	var errs []error
	for l, pool := range p.pools {
		errs = append(errs, pool.Close())
		delete(p.pools, l)
	}
	return errors.Join(errs...)
}

// sftpFS is a file tree on an SSH host. With a root it is a job's working directory
// there (names relative and confined to it); without, names are absolute (sftp URLs).
type sftpFS struct {
	c    *sftp.Client
	root string
	bare bool       // no control directory: a job directory of the job's choosing
	mu   sync.Mutex // guards made and the lazy resolution of real
	made bool       // root and its control directory exist
	real string     // root with symlinks resolved
}

func (s *sftpFS) abs(name string) (string, error) {
	if s.root == "" {
		return name, nil
	}
	real, err := s.resolved()
	if err != nil {
		return "", err
	}
	if err := confine(s.c, real, name); err != nil {
		return "", err
	}
	return path.Join(s.root, name), nil
}

func (s *sftpFS) create(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.makeLocked()
}

// makeLocked makes the working directory and its control directory. The usual case,
// a new job under a work root that exists, costs one Mkdir per level (two round trips
// instead of MkdirAll's look at every level); anything else falls back to MkdirAll.
func (s *sftpFS) makeLocked() error {
	if s.made {
		return nil
	}
	if !path.IsAbs(s.root) { // relative to the login's home, as OpenSSH's sftp has it
		home, err := s.c.Getwd()
		if err != nil {
			return fmt.Errorf("resolving working directory %s: %w", s.root, err)
		}
		s.root = path.Join(home, s.root)
	}
	ctl := path.Join(s.root, controlDir())
	if s.bare {
		ctl = s.root
	}
	if s.c.Mkdir(s.root) != nil || !s.bare && s.c.Mkdir(ctl) != nil {
		if err := s.c.MkdirAll(ctl); err != nil {
			return fmt.Errorf("making working directory %s: %w", s.root, err)
		}
	}
	s.made = true
	return nil
}

// resolved is the working directory with symlinks resolved, for confinement checks;
// it is looked up once, when a name in it is first used.
func (s *sftpFS) resolved() (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.real != "" {
		return s.real, nil
	}
	if err := s.makeLocked(); err != nil {
		return "", err
	}
	real, err := resolve(s.c, "/", s.root)
	if err != nil {
		return "", fmt.Errorf("resolving working directory %s: %w", s.root, err)
	}
	s.real = real
	return real, nil
}

func (s *sftpFS) open(ctx context.Context, name string) (io.ReadCloser, int64, error) {
	f, size, closeFile, err := s.openStream(ctx, name)
	if err != nil {
		return nil, 0, err
	}
	// File.WriteTo keeps many reads in flight the whole time; a pipe turns it into the
	// reader a copy to a destination without fileWriter consumes.
	pr, pw := io.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, err := f.WriteTo(pw)
		pw.CloseWithError(err)
	}()
	return readCloser{pr, func() error {
		pr.Close()
		<-done
		return closeFile()
	}}, size, nil
}

func (s *sftpFS) openStream(ctx context.Context, name string) (io.WriterTo, int64, func() error, error) {
	p, err := s.abs(name)
	if err != nil {
		return nil, 0, nil, err
	}
	f, err := s.c.Open(p)
	if err != nil {
		return nil, 0, nil, err
	}
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return nil, 0, nil, errors.Join(err, fmt.Errorf("%s is not a regular file", name))
	}
	return f, fi.Size(), f.Close, nil
}

type readCloser struct {
	io.Reader
	close func() error
}

func (r readCloser) Close() error { return r.close() }

func (s *sftpFS) put(ctx context.Context, name string, r io.Reader, size int64) error {
	p, err := s.abs(name)
	if err != nil {
		return err
	}
	if err := s.c.MkdirAll(path.Dir(p)); err != nil {
		return err
	}
	f, err := s.c.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC)
	if err != nil {
		return err
	}
	_, err = f.ReadFromWithConcurrency(r, 0)
	return errors.Join(err, f.Close())
}

func (s *sftpFS) list(ctx context.Context, dir string) ([]string, error) {
	p, err := s.abs(dir)
	if err != nil {
		return nil, err
	}
	p = strings.TrimSuffix(p, "/")
	var names []string
	w := s.c.Walk(p)
	for w.Step() {
		if err := w.Err(); err != nil {
			return nil, err
		}
		if w.Stat().IsDir() {
			continue
		}
		names = append(names, strings.TrimPrefix(w.Path(), p+"/"))
	}
	sort.Strings(names)
	return names, nil
}

func (s *sftpFS) removeAll(ctx context.Context, name string) error {
	p, err := s.abs(name)
	if err != nil {
		return err
	}
	if _, err := s.c.Lstat(p); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return s.c.RemoveAll(p)
}

func (s *sftpFS) makeExecutable(ctx context.Context, name string) error {
	p, err := s.abs(name)
	if err != nil {
		return err
	}
	return s.c.Chmod(p, 0o755)
}

// Close does nothing: the SFTP client is the connection's, shared.
func (s *sftpFS) Close() error { return nil }
