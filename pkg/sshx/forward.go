package sshx

import (
	"context"
	"fmt"
	"io"
	"net"
	"sync"
)

// Dialer opens a connection on this side for one connection accepted on the remote side.
type Dialer func(ctx context.Context) (net.Conn, error)

// forward is a client's remote forward: a loopback port on the remote host whose
// connections the client carries back to dial.
type forward struct {
	mu   sync.Mutex
	addr string // 127.0.0.1:port on the remote host, "" until made
}

// Forward asks the remote host to listen on a loopback port and carries every connection
// made to it back over this connection to dial (ssh -R): a program on that host reaches
// a service here without anything here listening beyond loopback. The client keeps one
// forward for its life; later calls return the same address. The Pool remembers each
// host's port, and a replacement connection asks for the same port again first, so that
// what was told the old address still reaches it.
func (c *Client) Forward(ctx context.Context, dial Dialer) (string, error) {
	c.fwd.mu.Lock()
	defer c.fwd.mu.Unlock()
	if c.fwd.addr != "" {
		return c.fwd.addr, nil
	}
	if err := c.Err(); err != nil {
		return "", err
	}
	ln, err := c.listenRemote(c.pool.forwardPort(c.host))
	if err != nil {
		return "", fmt.Errorf("sshx: remote forward on %s: %w", c.host, err)
	}
	c.fwd.addr = ln.Addr().String()
	if tcp, ok := ln.Addr().(*net.TCPAddr); ok {
		c.pool.rememberForward(c.host, tcp.Port)
	}
	serve := func() { c.serveForward(ln, dial) }
	if !c.pool.goOwned(serve) {
		ln.Close()
		return "", ErrPoolClosed
	}
	return c.fwd.addr, nil
}

// listenRemote listens on the remote loopback, on port when it is free, else on any.
func (c *Client) listenRemote(port int) (net.Listener, error) {
	if port > 0 {
		if ln, err := c.conn.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port)); err == nil {
			return ln, nil
		}
	}
	return c.conn.Listen("tcp", "127.0.0.1:0")
}

// serveForward carries each forwarded connection to dial until the connection ends.
func (c *Client) serveForward(ln net.Listener, dial Dialer) {
	go func() {
		<-c.done
		ln.Close()
	}()
	for {
		remote, err := ln.Accept()
		if err != nil {
			return
		}
		go pipe(c.pool.ctx, remote, dial)
	}
}

// pipe copies both ways between a forwarded connection and a fresh local one.
func pipe(ctx context.Context, remote net.Conn, dial Dialer) {
	defer remote.Close()
	local, err := dial(ctx)
	if err != nil {
		return
	}
	defer local.Close()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(local, remote); closeWrite(local); done <- struct{}{} }()
	go func() { _, _ = io.Copy(remote, local); closeWrite(remote); done <- struct{}{} }()
	select {
	case <-done:
		<-done
	case <-ctx.Done():
	}
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
}

// forwardPort is the remote port a host's last forward had, 0 for none.
func (p *Pool) forwardPort(addr string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.forwards[addr]
}

func (p *Pool) rememberForward(addr string, port int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.forwards == nil {
		p.forwards = map[string]int{}
	}
	p.forwards[addr] = port
}
