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
}

func (p *Pool) newClient(addr string, conn *ssh.Client, fingerprint string) *Client {
	c := &Client{
		pool: p, host: addr, conn: conn, fingerprint: fingerprint,
		sessions: make(chan struct{}, p.cfg.MaxSessionsPerConn),
		done:     make(chan struct{}),
		sftpLock: make(chan struct{}, 1),
	}
	p.wg.Add(1)
	go c.watch()
	if p.cfg.KeepAlive > 0 {
		p.wg.Add(1)
		go c.keepAlive(p.cfg.KeepAlive)
	}
	return c
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
	defer c.pool.wg.Done()
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

// keepAlive sends keepalive@openssh.com every interval and closes the connection when
// an answer (any answer, even a refusal) does not arrive within another interval.
func (c *Client) keepAlive(interval time.Duration) {
	defer c.pool.wg.Done()
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-c.done:
			return
		case <-t.C:
		}
		answered := make(chan error, 1)
		go func() {
			_, _, err := c.conn.SendRequest("keepalive@openssh.com", true, nil)
			answered <- err
		}()
		timeout := time.NewTimer(interval)
		select {
		case err := <-answered:
			timeout.Stop()
			if err != nil {
				c.close(fmt.Errorf("keep-alive failed: %w", err))
				return
			}
		case <-timeout.C:
			c.close(fmt.Errorf("keep-alive unanswered for %v", interval))
			return
		case <-c.done:
			timeout.Stop()
			return
		}
	}
}
