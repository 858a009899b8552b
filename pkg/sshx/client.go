package sshx

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/pkg/sftp"
	"golang.org/x/crypto/ssh"
)

// ErrConnectionLost marks work that failed because its connection died; get a fresh
// Client from the Pool.
var ErrConnectionLost = errors.New("sshx: connection lost")

// Client is one verified connection to a host, shared by everyone the Pool hands it to.
// It stays usable until the connection dies or the Pool closes; then its methods fail
// with ErrConnectionLost or ErrPoolClosed and Pool.Client returns its replacement.
type Client struct {
	pool        *Pool
	host        string
	conn        *ssh.Client
	fingerprint string
	sessions    chan struct{} // one token per open session, MaxSessionsPerConn of them

	done      chan struct{} // closed once the connection is gone
	closeOnce sync.Once
	mu        sync.Mutex
	reason    error // why the connection ended

	sftpLock chan struct{} // held while the SFTP client is being created
	sftpMu   sync.Mutex
	sftp     *sftp.Client

	fwd forward // the remote forward, once asked for
}

func (p *Pool) newClient(addr string, conn *ssh.Client, fingerprint string) (*Client, error) {
	c := &Client{
		pool: p, host: addr, conn: conn, fingerprint: fingerprint,
		sessions: make(chan struct{}, p.cfg.MaxSessionsPerConn),
		done:     make(chan struct{}),
		sftpLock: make(chan struct{}, 1),
	}
	if !p.goOwned(c.watch) {
		conn.Close()
		return nil, ErrPoolClosed
	}
	if p.cfg.KeepAlive > 0 {
		p.goOwned(func() { c.keepAlive(p.cfg.KeepAlive) })
	}
	return c, nil
}

// Host is the host:port this client is connected to.
func (c *Client) Host() string { return c.host }

// HostKeyFingerprint is the SHA256:... fingerprint of the host key verified when this
// connection was made.
func (c *Client) HostKeyFingerprint() string { return c.fingerprint }

// Done is closed when the connection is gone.
func (c *Client) Done() <-chan struct{} { return c.done }

// Err returns why the connection ended, or nil while it is alive.
func (c *Client) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reason
}

func (c *Client) alive() bool {
	select {
	case <-c.done:
		return false
	default:
		return true
	}
}

// lostErr returns an error wrapping ErrConnectionLost (and cause) if the connection is
// gone, else nil. A failure seen by a session can come before the connection's watcher
// has noticed the loss, so when the connection still looks alive the peer is asked: the
// request fails once the connection is really gone, and a peer that does not answer
// within DialTimeout is given up on.
func (c *Client) lostErr(cause error) error {
	if c.alive() && c.answers(c.pool.cfg.DialTimeout) {
		return nil
	}
	reason := c.Err()
	switch {
	case reason == nil:
		reason = cause
	case errors.Is(reason, ErrPoolClosed), errors.Is(reason, ErrConnectionLost):
		return reason
	}
	return fmt.Errorf("%w to %s: %v", ErrConnectionLost, c.host, reason)
}

// answers reports whether the peer answers a keep-alive within timeout; if it does not,
// the connection is closed as unresponsive.
func (c *Client) answers(timeout time.Duration) bool {
	answered := make(chan error, 1)
	go c.sendKeepAlive(answered)
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case err := <-answered:
		return err == nil
	case <-t.C:
		c.close(fmt.Errorf("no answer to a keep-alive within %v", timeout))
		return false
	}
}

// close ends the connection, recording why (the first reason wins).
func (c *Client) close(reason error) {
	c.mu.Lock()
	if c.reason == nil {
		c.reason = reason
	}
	c.mu.Unlock()
	c.conn.Close()
}

// watch marks the client dead once its connection ends, for whatever reason.
func (c *Client) watch() {
	err := c.conn.Wait()
	if err == nil {
		err = errors.New("closed by peer")
	}
	c.mu.Lock()
	if c.reason == nil {
		c.reason = fmt.Errorf("%w to %s: %v", ErrConnectionLost, c.host, err)
	} else if !errors.Is(c.reason, ErrPoolClosed) && !errors.Is(c.reason, ErrConnectionLost) {
		c.reason = fmt.Errorf("%w to %s: %v", ErrConnectionLost, c.host, c.reason)
	}
	reason := c.reason
	c.mu.Unlock()
	c.closeOnce.Do(func() { close(c.done) })
	if !errors.Is(reason, ErrPoolClosed) {
		c.pool.logger.Warn("sshx: connection lost", "host", c.host, "err", reason)
	}
}

// keepAliveMaxMissed is how many intervals a keep-alive may go unanswered before the
// connection is declared dead (OpenSSH's ServerAliveCountMax default).
const keepAliveMaxMissed = 3

// keepAlive sends keepalive@openssh.com every interval, one request at a time, and
// closes the connection once a request has gone unanswered (any answer counts, even a
// refusal) for keepAliveMaxMissed intervals.
func (c *Client) keepAlive(interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	var answered chan error // non-nil while a request is out
	missed := 0
	for {
		select {
		case <-c.done:
			return
		case err := <-answered:
			answered, missed = nil, 0
			if err != nil {
				c.close(fmt.Errorf("keep-alive failed: %w", err))
				return
			}
		case <-t.C:
			if answered == nil {
				answered = make(chan error, 1)
				go c.sendKeepAlive(answered)
				continue
			}
			if missed++; missed >= keepAliveMaxMissed {
				c.close(fmt.Errorf("keep-alive unanswered for %v", time.Duration(missed)*interval))
				return
			}
		}
	}
}

func (c *Client) sendKeepAlive(answered chan<- error) {
	_, _, err := c.conn.SendRequest("keepalive@openssh.com", true, nil)
	answered <- err
}
