package main

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/gridwire/gridwire/pkg/bus"
	"github.com/gridwire/gridwire/pkg/dirlock"
	"github.com/nats-io/nats.go"
)

// startServe runs `serve` with args until the test ends and waits for its HTTP API.
func startServe(t *testing.T, getenv func(string) string, args ...string) string {
	t.Helper()
	addr := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() {
		err := run(ctx, append([]string{"serve", "--http", addr, "--log-level", "error"}, args...),
			getenv, &strings.Builder{}, &strings.Builder{})
		served <- err
	}()
	t.Cleanup(func() { cancel(); <-served })
	deadline := time.Now().Add(20 * time.Second)
	for {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return addr
		}
		select {
		case err := <-served:
			t.Fatalf("serve ended: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("serve did not listen")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A data directory holds one embedded log: a second serve on it refuses at once and
// says why, instead of opening the same store twice.
func TestSecondServeOnADataDirectoryRefuses(t *testing.T) {
	dir := t.TempDir()
	startServe(t, func(string) string { return "" }, "--data", dir)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, _, err := runCLI(ctx, "serve", "--data", dir, "--http", freeAddr(t))
	if !errors.Is(err, dirlock.ErrLocked) || !strings.Contains(err.Error(), dir) {
		t.Fatalf("second serve on %s: %v; want a refusal naming the directory", dir, err)
	}
}

// --nats-listen opens the log to other processes: never without credentials, and a
// client without them is turned away while one with them gets in.
func TestNATSListenRequiresCredentials(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	natsAddr := freeAddr(t)
	_, _, err := runCLI(ctx, "serve", "--data", t.TempDir(), "--http", freeAddr(t), "--nats-listen", natsAddr)
	if !errors.Is(err, bus.ErrListenNeedsAuth) || !strings.Contains(err.Error(), "GRIDWIRE_NATS_PASSWORD") {
		t.Fatalf("--nats-listen without credentials: %v; want a refusal saying what to set", err)
	}

	env := map[string]string{"GRIDWIRE_NATS_PASSWORD": "s3cret"}
	startServe(t, func(k string) string { return env[k] }, "--data", t.TempDir(), "--nats-listen", natsAddr, "--nats-user", "gw")
	if nc, err := nats.Connect("nats://"+natsAddr, nats.MaxReconnects(0)); err == nil {
		nc.Close()
		t.Fatal("an anonymous client connected to the NATS listener")
	}
	if nc, err := nats.Connect("nats://"+natsAddr, nats.UserInfo("gw", "wrong"), nats.MaxReconnects(0)); err == nil {
		nc.Close()
		t.Fatal("a wrong password connected to the NATS listener")
	}
	nc, err := nats.Connect("nats://"+natsAddr, nats.UserInfo("gw", "s3cret"))
	if err != nil {
		t.Fatalf("the configured user: %v", err)
	}
	defer nc.Close()
	if _, err := nc.Request("$JS.API.STREAM.INFO.JOBS", nil, 5*time.Second); err != nil {
		t.Fatalf("the configured user reads JetStream: %v", err)
	}
}
