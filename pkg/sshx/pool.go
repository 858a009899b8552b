package sshx

import (
	"context"
	"crypto/ed25519"
	crand "crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"
)

// ErrPoolClosed is returned by a closed Pool.
var ErrPoolClosed = errors.New("sshx: pool closed")

// Pool keeps one verified connection per host and hands it to every caller; many
// sessions run over it concurrently. A connection that dies (keep-alive unanswered, peer
// gone) is replaced at the next Client call; failed attempts to a host are spaced by
// exponential backoff with jitter. A Pool is safe for concurrent use.
type Pool struct {
	cfg     Config
	logger  *slog.Logger
	signers []ssh.Signer
	probe   ssh.PublicKey // a random key, to ask known_hosts what it knows of a host

	ctx    context.Context // ends when the pool closes; bounds dials and keep-alives
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu       sync.Mutex
	hosts    map[string]*host
	closed   bool
	forwards map[string]int // host:port → the remote port of its last forward
}

// host is the pool's state for one host:port.
type host struct {
	addr string

	mu       sync.Mutex
	client   *Client
	dialing  *dialCall // the dial in flight, shared by every caller
	failures int       // consecutive failed dials
	retryAt  time.Time // no new dial before this
	lastErr  error
}

type dialCall struct {
	done   chan struct{}
	client *Client
	err    error
}

// NewPool checks cfg, loads the identity files and known_hosts once to fail early, and
// returns an empty pool; connections are made on demand. A nil logger discards logs.
func NewPool(cfg Config, logger *slog.Logger) (*Pool, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := checkKnownHostsFile(cfg); err != nil {
		return nil, err
	}
	signers, err := loadIdentities(cfg.IdentityFiles)
	if err != nil {
		return nil, err
	}
	probePub, _, err := ed25519.GenerateKey(crand.Reader)
	if err != nil {
		return nil, fmt.Errorf("sshx: %w", err)
	}
	probe, err := ssh.NewPublicKey(probePub)
	if err != nil {
		return nil, fmt.Errorf("sshx: %w", err)
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if cfg.InsecureIgnoreHostKey {
		logger.Warn("sshx: host keys are NOT checked (InsecureIgnoreHostKey); this is for tests only")
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Pool{
		cfg: cfg, logger: logger, signers: signers, probe: probe,
		ctx: ctx, cancel: cancel, hosts: map[string]*host{},
	}, nil
}

// Client returns the live connection to hostport ("host" means port 22), dialling it if
// there is none. Concurrent callers share one dial. After failed dials the next attempt
// waits out the backoff (bounded by ctx); each call makes at most one attempt and returns
// its error. Calling Client for every unit of work is cheap and is how callers pick up a
// replacement after a connection died.
func (p *Pool) Client(ctx context.Context, hostport string) (*Client, error) {
	h, err := p.host(withPort(hostport))
	if err != nil {
		return nil, err
	}
	for {
		live, call, wait, err := h.next(ctx, p)
		switch {
		case err != nil:
			return nil, err
		case live != nil:
			return live, nil
		case call == nil:
			if err := sleep(ctx, wait); err != nil {
				return nil, fmt.Errorf("sshx: waiting to reconnect to %s: %w", h.addr, err)
			}
			continue
		}
		select {
		case <-call.done:
			return call.client, call.err
		case <-ctx.Done():
			return nil, fmt.Errorf("sshx: connecting to %s: %w", h.addr, ctx.Err())
		}
	}
}

// next returns the live connection, else the dial to wait on (starting one if none is in
// flight), else how long to wait before a dial may start.
func (h *host) next(ctx context.Context, p *Pool) (*Client, *dialCall, time.Duration, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if c := h.client; c != nil && c.alive() {
		return c, nil, 0, nil
	}
	if h.dialing != nil {
		return nil, h.dialing, 0, nil
	}
	if wait := time.Until(h.retryAt); wait > 0 {
		if deadline, ok := ctx.Deadline(); ok && deadline.Before(h.retryAt) {
			return nil, nil, 0, fmt.Errorf("sshx: %s: next attempt after %s, beyond the caller's deadline; last error: %w",
				h.addr, h.retryAt.Format(time.RFC3339Nano), h.lastErr)
		}
		return nil, nil, wait, nil
	}
	call := &dialCall{done: make(chan struct{})}
	if !p.goOwned(func() { p.runDial(h, call) }) {
		return nil, nil, 0, ErrPoolClosed
	}
	h.dialing = call
	return nil, call, 0, nil
}

// goOwned runs f in a goroutine Close waits for, unless the pool is closed. Lock order:
// a host's mu before the pool's.
func (p *Pool) goOwned(f func()) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		f()
	}()
	return true
}

func (p *Pool) isClosed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closed
}

func (p *Pool) runDial(h *host, call *dialCall) {
	defer close(call.done)
	c, err := p.dial(p.ctx, h.addr)
	h.mu.Lock()
	defer h.mu.Unlock()
	// Under h.mu, so that Close either sees h.client set here or this sees it closed.
	if err == nil && p.isClosed() {
		c.close(ErrPoolClosed)
		c, err = nil, ErrPoolClosed
	}
	h.dialing = nil
	call.client, call.err = c, err
	if err != nil {
		h.failures++
		h.lastErr = err
		delay := backoff(p.cfg.BackoffInitial, p.cfg.BackoffMax, h.failures)
		h.retryAt = time.Now().Add(delay)
		p.logger.Warn("sshx: connection failed", "host", h.addr, "attempt", h.failures, "retry_in", delay, "err", err)
		return
	}
	h.failures, h.retryAt, h.lastErr = 0, time.Time{}, nil
	h.client = c
	p.logger.Info("sshx: connected", "host", h.addr, "fingerprint", c.fingerprint)
}

func (p *Pool) host(addr string) (*host, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, ErrPoolClosed
	}
	h, ok := p.hosts[addr]
	if !ok {
		h = &host{addr: addr}
		p.hosts[addr] = h
	}
	return h, nil
}

// Close closes every connection and waits for the pool's goroutines. Clients handed out
// fail from then on. Close is idempotent.
func (p *Pool) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	hosts := make([]*host, 0, len(p.hosts))
	for _, h := range p.hosts {
		hosts = append(hosts, h)
	}
	p.mu.Unlock()
	p.cancel()
	for _, h := range hosts {
		h.mu.Lock()
		c := h.client
		h.client = nil
		h.mu.Unlock()
		if c != nil {
			c.close(ErrPoolClosed)
		}
	}
	p.wg.Wait()
	return nil
}

// backoff is the delay after the n-th consecutive failure: initial·2^(n-1) capped at
// max, then jittered down by up to half so that many pools do not retry in step.
func backoff(initial, limit time.Duration, n int) time.Duration {
	d := initial
	for i := 1; i < n && d < limit; i++ {
		d *= 2
	}
	d = min(d, limit)
	half := d / 2
	return half + rand.N(d-half+1)
}

func withPort(hostport string) string {
	if _, _, err := net.SplitHostPort(hostport); err == nil {
		return hostport
	}
	return net.JoinHostPort(hostport, "22")
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
