package main

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gridwire/gridwire/pkg/bus"
	"github.com/gridwire/gridwire/pkg/dirlock"
	"github.com/gridwire/gridwire/pkg/proctest"
	"github.com/nats-io/nats.go"
)

// startServe runs `serve` with args until the test ends and waits for its HTTP API.
func startServe(t *testing.T, getenv func(string) string, args ...string) string {
	t.Helper()
	addr := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() {
		// --allow-root-jobs: the tests run as root on CI.
		err := run(ctx, append([]string{"serve", "--http", addr, "--log-level", "error", "--allow-root-jobs"}, args...),
			getenv, &strings.Builder{}, &strings.Builder{})
		served <- err
	}()
	// Jobs still running when the test ends (under the test's scratch directories, where
	// its data directory is) are ended with it rather than left on the machine.
	scratch := filepath.Dir(t.TempDir())
	t.Cleanup(func() { cancel(); <-served; proctest.KillSessionsNaming(scratch) })
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
	data := filepath.Join(t.TempDir(), "data")
	_, _, err := runCLI(ctx, "serve", "--data", data, "--http", freeAddr(t), "--nats-listen", natsAddr)
	if _, exit := classify(err); !errors.Is(err, bus.ErrListenNeedsAuth) || !strings.Contains(err.Error(), "GRIDWIRE_NATS_PASSWORD") || exit != exitUsage {
		t.Fatalf("--nats-listen without credentials: %v (exit %d); want a refusal of the flags (exit %d) saying what to set", err, exit, exitUsage)
	}
	if _, err := os.Stat(data); err == nil {
		t.Fatalf("the refused start made %s", data)
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

// audit invariants passes a sound log and names what an unexpected job breaks.
func TestAuditInvariantsVerb(t *testing.T) {
	h := newHarness(t)
	id := h.submitJSON(map[string]any{"version": 3, "executable": "/bin/true"})
	h.waitEnd(id)
	expect := filepath.Join(t.TempDir(), "ids")
	if err := os.WriteFile(expect, []byte(id+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, errOut, err := runCLI(context.Background(), "audit", "invariants", "--nats-url="+h.natsURL(), "--expect", expect)
	if err != nil || !strings.Contains(out, "lost 0 duplicated 0 stuck 0 illegal 0") {
		t.Fatalf("a sound log: %v\n%s%s", err, out, errOut)
	}
	if err := os.WriteFile(expect, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	out, _, err = runCLI(context.Background(), "audit", "invariants", "--nats-url="+h.natsURL(), "--expect", expect)
	var ec exitCode
	if !errors.As(err, &ec) || ec != 1 || !strings.Contains(out, "duplicated 1") || !strings.Contains(out, id) {
		t.Fatalf("a job no submission named: %v\n%s", err, out)
	}
}

// The verbs that read the log offline refuse a directory with no log (exit 4, nothing
// made there: an empty store would pass every check) and one a running gridwire holds
// (exit 5, saying how to read that log through NATS instead).
func TestOfflineVerbsNeedALogTheyMayRead(t *testing.T) {
	empty := filepath.Join(t.TempDir(), "nowhere")
	verbs := [][]string{{"audit", "invariants"}, {"audit", "verify", "--all"}, {"replay"}}
	for _, v := range verbs {
		status, out, errOut := cli(context.Background(), append(v, "--data", empty)...)
		if status != exitNotFound || !strings.Contains(errOut, "no gridwire log in "+empty) {
			t.Errorf("%v on no log: exit %d %s%s, want exit %d", v, status, out, errOut, exitNotFound)
		}
		if _, err := os.Stat(empty); err == nil {
			t.Fatalf("%v made %s", v, empty)
		}
	}
	held := t.TempDir()
	if err := os.MkdirAll(filepath.Join(held, "jetstream"), 0o750); err != nil {
		t.Fatal(err)
	}
	lock, err := dirlock.Acquire(held)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Release()
	for _, v := range verbs {
		status, out, errOut := cli(context.Background(), append(v, "--data", held)...)
		if status != exitRefused || !strings.Contains(errOut, "a running gridwire serves this log") || !strings.Contains(errOut, "--nats-url") {
			t.Errorf("%v on a held log: exit %d %s%s, want exit %d and how to read it through NATS", v, status, out, errOut, exitRefused)
		}
	}
}
