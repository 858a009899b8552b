package sshx_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gridwire/gridwire/pkg/sshx"
	"github.com/gridwire/gridwire/pkg/sshx/sshtest"
)

func TestReconnectAfterServerDropsConnections(t *testing.T) {
	srv := sshtest.NewServer(t)
	pool := newPool(t, srv)
	old := client(t, pool, srv.Addr)
	run(t, old, "true")

	srv.DropConnections()
	waitDone(t, old)
	if !errors.Is(old.Err(), sshx.ErrConnectionLost) {
		t.Errorf("Err() = %v, want ErrConnectionLost", old.Err())
	}
	_, err := old.Run(testCtx(t), "true", nil)
	if !errors.Is(err, sshx.ErrNotStarted) || !errors.Is(err, sshx.ErrConnectionLost) {
		t.Errorf("Run on a dead connection: %v, want ErrNotStarted and ErrConnectionLost", err)
	}

	c := client(t, pool, srv.Addr)
	if c == old {
		t.Fatal("pool handed out the dead connection")
	}
	if res := run(t, c, "echo back"); string(res.Stdout) != "back\n" {
		t.Errorf("after reconnect: %q", res.Stdout)
	}
	if got := srv.Accepted(); got != 2 {
		t.Errorf("server accepted %d connections, want 2", got)
	}
}

func TestReconnectWhenHostReturns(t *testing.T) {
	hostKey := sshtest.NewSigner(t)
	srv := sshtest.NewServer(t, sshtest.WithHostKey(hostKey))
	pool := newPool(t, srv)
	first := client(t, pool, srv.Addr)
	run(t, first, "true")

	srv.Close()
	waitDone(t, first)
	for range 3 { // consecutive failures back off, then each call fails with the cause
		if _, err := pool.Client(testCtx(t), srv.Addr); err == nil || !strings.Contains(err.Error(), "connection refused") {
			t.Fatalf("Client while the host is down: %v, want connection refused", err)
		}
	}

	back := sshtest.NewServer(t, sshtest.WithAddr(srv.Addr), sshtest.WithHostKey(hostKey),
		sshtest.WithAuthorizedKey(srv.ClientSigner.PublicKey()))
	c := client(t, pool, srv.Addr)
	if res := run(t, c, "echo up"); string(res.Stdout) != "up\n" {
		t.Errorf("after the host returned: %q", res.Stdout)
	}
	if back.Accepted() != 1 {
		t.Errorf("returned host accepted %d connections, want 1", back.Accepted())
	}
}

func TestKeepAliveClosesSilentConnection(t *testing.T) {
	srv := sshtest.NewServer(t)
	pool := newPool(t, srv, func(c *sshx.Config) { c.KeepAlive = 20 * time.Millisecond })
	c := client(t, pool, srv.Addr)
	run(t, c, "true")

	srv.Stall()
	waitDone(t, c)
	if err := c.Err(); !errors.Is(err, sshx.ErrConnectionLost) || !strings.Contains(err.Error(), "keep-alive unanswered") {
		t.Errorf("Err() = %v, want ErrConnectionLost naming the keep-alive", err)
	}
	srv.Resume()
	if res := run(t, client(t, pool, srv.Addr), "echo again"); string(res.Stdout) != "again\n" {
		t.Errorf("after keep-alive reconnect: %q", res.Stdout)
	}
}

func TestKeepAliveKeepsLiveConnection(t *testing.T) {
	srv := sshtest.NewServer(t)
	pool := newPool(t, srv, func(c *sshx.Config) { c.KeepAlive = 40 * time.Millisecond })
	c := client(t, pool, srv.Addr)
	// The server refuses every keep-alive (as OpenSSH does), which still proves it alive.
	for srv.KeepAlives() < 5 {
		select {
		case <-c.Done():
			t.Fatalf("live connection ended: %v", c.Err())
		case <-testCtx(t).Done():
			t.Fatalf("server saw only %d keep-alives", srv.KeepAlives())
		case <-time.After(10 * time.Millisecond):
		}
	}
	run(t, c, "true")
	if srv.Accepted() != 1 {
		t.Errorf("server accepted %d connections, want 1", srv.Accepted())
	}
}

func TestPoolClose(t *testing.T) {
	srv := sshtest.NewServer(t)
	pool := newPool(t, srv)
	c := client(t, pool, srv.Addr)
	if err := pool.Close(); err != nil {
		t.Fatal(err)
	}
	if err := pool.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := pool.Client(testCtx(t), srv.Addr); !errors.Is(err, sshx.ErrPoolClosed) {
		t.Errorf("Client after Close: %v, want ErrPoolClosed", err)
	}
	if _, err := c.Run(testCtx(t), "true", nil); !errors.Is(err, sshx.ErrPoolClosed) {
		t.Errorf("Run after Close: %v, want ErrPoolClosed", err)
	}
}

func TestClientDeadlineBeforeBackoff(t *testing.T) {
	srv := sshtest.NewServer(t)
	pool := newPool(t, srv, func(c *sshx.Config) { c.BackoffInitial, c.BackoffMax = time.Hour, time.Hour })
	srv.Close()
	if _, err := pool.Client(testCtx(t), srv.Addr); err == nil {
		t.Fatal("Client to a closed server succeeded")
	}
	// The next attempt is an hour away, past the caller's deadline: fail now, naming the
	// last error, instead of sleeping until the deadline.
	_, err := pool.Client(testCtx(t), srv.Addr)
	if err == nil || !strings.Contains(err.Error(), "next attempt") || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("Client within the backoff: %v", err)
	}
}

func TestCloseWhileInUse(t *testing.T) {
	srv := sshtest.NewServer(t)
	pool := newPool(t, srv)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 8 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				c, err := pool.Client(testCtx(t), srv.Addr)
				if err != nil {
					continue
				}
				c.Run(testCtx(t), "true", nil)
				c.SFTP(testCtx(t))
			}
		})
	}
	waitFor(t, "20 commands", func() bool { return srv.Execs() >= 20 })
	if err := pool.Close(); err != nil {
		t.Fatal(err)
	}
	close(stop)
	wg.Wait()
	if _, err := pool.Client(testCtx(t), srv.Addr); !errors.Is(err, sshx.ErrPoolClosed) {
		t.Errorf("Client after Close: %v", err)
	}
}

func TestCallerGivingUpDoesNotAbortSharedDial(t *testing.T) {
	srv := sshtest.NewServer(t)
	pool := newPool(t, srv)
	srv.Stall() // the handshake hangs until Resume
	ctxA, cancelA := context.WithCancel(testCtx(t))
	errA := make(chan error, 1)
	go func() {
		_, err := pool.Client(ctxA, srv.Addr)
		errA <- err
	}()
	resB := make(chan *sshx.Client, 1)
	go func() {
		c, err := pool.Client(testCtx(t), srv.Addr)
		if err != nil {
			t.Error(err)
		}
		resB <- c
	}()
	waitFor(t, "the dial to reach the server", func() bool { return srv.Accepted() >= 1 })
	cancelA()
	if err := <-errA; !errors.Is(err, context.Canceled) {
		t.Errorf("caller A: %v, want context.Canceled", err)
	}
	srv.Resume()
	if c := <-resB; c == nil || srv.Accepted() != 1 {
		t.Errorf("caller B got %v after %d connections; want the one shared dial's client", c, srv.Accepted())
	}
}
