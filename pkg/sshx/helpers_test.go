package sshx_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/gridwire/gridwire/pkg/sshx"
	"github.com/gridwire/gridwire/pkg/sshx/sshtest"
)

// newPool returns a pool that trusts srv's host key and authenticates with its client
// key; edit adjusts the config first.
func newPool(t testing.TB, srv *sshtest.Server, edit ...func(*sshx.Config)) *sshx.Pool {
	t.Helper()
	cfg := sshx.Config{
		User:           "tester",
		IdentityFiles:  []string{srv.ClientKeyFile},
		KnownHostsFile: srv.KnownHostsFile,
		DialTimeout:    5 * time.Second,
		BackoffInitial: 5 * time.Millisecond,
		BackoffMax:     20 * time.Millisecond,
	}
	for _, e := range edit {
		e(&cfg)
	}
	pool, err := sshx.NewPool(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("NewPool: %v", err)
	}
	t.Cleanup(func() { pool.Close() })
	return pool
}

// testCtx bounds a test's waits so that a hang fails the test instead of the suite.
func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func client(t testing.TB, pool *sshx.Pool, addr string) *sshx.Client {
	t.Helper()
	c, err := pool.Client(testCtx(t), addr)
	if err != nil {
		t.Fatalf("Client(%s): %v", addr, err)
	}
	return c
}

func run(t testing.TB, c *sshx.Client, script string) sshx.Result {
	t.Helper()
	res, err := c.Run(testCtx(t), script, nil)
	if err != nil {
		t.Fatalf("Run(%q): %v", script, err)
	}
	return res
}

// waitDone waits for c's connection to end, failing the test if it does not.
func waitDone(t testing.TB, c *sshx.Client) {
	t.Helper()
	select {
	case <-c.Done():
	case <-testCtx(t).Done():
		t.Fatalf("connection to %s still alive", c.Host())
	}
}

// waitFor polls cond until it holds, failing the test if it never does.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	ctx := testCtx(t)
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s", what)
		case <-time.After(time.Millisecond):
		}
	}
}
