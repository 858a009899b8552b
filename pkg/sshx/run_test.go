package sshx_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gridwire/gridwire/pkg/sshx"
	"github.com/gridwire/gridwire/pkg/sshx/sshtest"
)

func TestRunResults(t *testing.T) {
	srv := sshtest.NewServer(t)
	c := client(t, newPool(t, srv), srv.Addr)
	tests := []struct {
		script string
		want   sshx.Result
	}{
		{"true", sshx.Result{}},
		{"echo out; echo err >&2; exit 3", sshx.Result{Stdout: []byte("out\n"), Stderr: []byte("err\n"), ExitCode: 3}},
		{"printf '%s|' \"$0\" 'a b'", sshx.Result{Stdout: []byte("/bin/sh|a b|")}},
		{"pwd", sshx.Result{Stdout: []byte(srv.Home + "\n")}},
		{"exit 255", sshx.Result{ExitCode: 255}},
		{"kill -TERM $$", sshx.Result{ExitCode: 128 + 15, Signal: "TERM"}},
		{"no-such-command-here 2>/dev/null", sshx.Result{ExitCode: 127}},
	}
	for _, tt := range tests {
		t.Run(tt.script, func(t *testing.T) {
			got := run(t, c, tt.script)
			if diff := cmp.Diff(tt.want, got, cmp.Comparer(bytes.Equal)); diff != "" {
				t.Errorf("Run(%q) (-want +got):\n%s", tt.script, diff)
			}
		})
	}
}

func TestRunStdin(t *testing.T) {
	srv := sshtest.NewServer(t)
	c := client(t, newPool(t, srv), srv.Addr)
	big := make([]byte, 3<<20)
	rand.Read(big)
	for name, in := range map[string][]byte{"small": []byte("one\ntwo\n"), "3MiB": big, "empty": {}} {
		t.Run(name, func(t *testing.T) {
			res, err := c.Run(testCtx(t), "cat; echo done >&2", bytes.NewReader(in))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(res.Stdout, in) || string(res.Stderr) != "done\n" || res.ExitCode != 0 {
				t.Errorf("got %d bytes stdout (want %d), stderr %q, exit %d", len(res.Stdout), len(in), res.Stderr, res.ExitCode)
			}
		})
	}
}

// RunTo hands the command's output over as it comes: the command's second line waits
// for a file that the writer makes only once it has the first line, which a buffered
// run would never let happen (testCtx bounds a broken RunTo).
func TestRunToStreamsOutput(t *testing.T) {
	srv := sshtest.NewServer(t)
	c := client(t, newPool(t, srv), srv.Addr)
	gate := filepath.Join(t.TempDir(), "gate")
	var got bytes.Buffer
	w := writerFunc(func(p []byte) (int, error) {
		got.Write(p)
		if bytes.Contains(got.Bytes(), []byte("\n")) {
			return len(p), os.WriteFile(gate, nil, 0o644)
		}
		return len(p), nil
	})
	res, err := c.RunTo(testCtx(t), "echo first; until [ -e '"+gate+"' ]; do sleep 0.005; done; echo second; echo e >&2; exit 4", nil, w)
	if err != nil || res.ExitCode != 4 || res.Stdout != nil || string(res.Stderr) != "e\n" || got.String() != "first\nsecond\n" {
		t.Fatalf("RunTo: %+v %v, wrote %q", res, err, got.String())
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

func TestConcurrentRunsShareOneConnection(t *testing.T) {
	srv := sshtest.NewServer(t)
	pool := newPool(t, srv, func(c *sshx.Config) { c.MaxSessionsPerConn = 3 })
	const n = 40
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			c, err := pool.Client(testCtx(t), srv.Addr)
			if err != nil {
				errs <- err
				return
			}
			res, err := c.Run(testCtx(t), fmt.Sprintf("sleep 0.01; echo %d", i), nil)
			if err != nil {
				errs <- err
				return
			}
			if got := strings.TrimSpace(string(res.Stdout)); got != strconv.Itoa(i) {
				errs <- fmt.Errorf("run %d printed %q", i, got)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if got := srv.Accepted(); got != 1 {
		t.Errorf("server accepted %d connections, want 1", got)
	}
	if got := srv.Execs(); got != n {
		t.Errorf("server ran %d commands, want %d", got, n)
	}
	if got := srv.PeakExecs(); got > 3 || got < 2 {
		t.Errorf("at most %d commands ran at once, want 2..3 (MaxSessionsPerConn 3)", got)
	}
}

func TestConcurrentCallersShareOneDial(t *testing.T) {
	srv := sshtest.NewServer(t)
	pool := newPool(t, srv)
	const n = 20
	clients := make([]*sshx.Client, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			c, err := pool.Client(testCtx(t), srv.Addr)
			if err != nil {
				t.Error(err)
			}
			clients[i] = c
		})
	}
	wg.Wait()
	for i, c := range clients {
		if c != clients[0] {
			t.Fatalf("caller %d got a different client", i)
		}
	}
	if got := srv.Accepted(); got != 1 {
		t.Errorf("server accepted %d connections, want 1", got)
	}
	if got, want := clients[0].HostKeyFingerprint(), srv.HostKeyFingerprint; got != want {
		t.Errorf("HostKeyFingerprint() = %q, want %q", got, want)
	}
}

func TestRunCancelKillsCommand(t *testing.T) {
	srv := sshtest.NewServer(t)
	c := client(t, newPool(t, srv), srv.Addr)
	pidFile := filepath.Join(t.TempDir(), "pid")
	ctx, cancel := context.WithCancel(testCtx(t))
	done := make(chan error, 1)
	go func() {
		_, err := c.Run(ctx, "echo $$ > "+pidFile+".tmp && mv "+pidFile+".tmp "+pidFile+"; exec sleep 60", nil)
		done <- err
	}()
	pid := waitForPID(t, pidFile)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Run after cancel: %v, want context.Canceled", err)
	}
	for syscall.Kill(pid, 0) == nil {
		select {
		case <-testCtx(t).Done():
			t.Fatalf("remote command %d still running after cancel", pid)
		case <-time.After(5 * time.Millisecond):
		}
	}
	// The connection survives a cancelled session.
	if res := run(t, c, "echo alive"); string(res.Stdout) != "alive\n" {
		t.Errorf("after cancel: %q", res.Stdout)
	}
}

func waitForPID(t *testing.T, path string) int {
	t.Helper()
	for {
		b, err := os.ReadFile(path)
		if err == nil {
			pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
			if err != nil {
				t.Fatal(err)
			}
			return pid
		}
		select {
		case <-testCtx(t).Done():
			t.Fatal("remote command never started")
		case <-time.After(2 * time.Millisecond):
		}
	}
}

func TestRunWithEndedContextDoesNotStart(t *testing.T) {
	srv := sshtest.NewServer(t)
	c := client(t, newPool(t, srv), srv.Addr)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for range 20 {
		_, err := c.Run(ctx, "true", nil)
		if !errors.Is(err, sshx.ErrNotStarted) || !errors.Is(err, context.Canceled) {
			t.Fatalf("Run with an ended context: %v, want ErrNotStarted and context.Canceled", err)
		}
	}
	if srv.Execs() != 0 {
		t.Errorf("%d commands ran under an ended context", srv.Execs())
	}
}

func TestRunReportsConnectionLostMidCommand(t *testing.T) {
	srv := sshtest.NewServer(t)
	c := client(t, newPool(t, srv), srv.Addr)
	pidFile := filepath.Join(t.TempDir(), "pid")
	done := make(chan error, 1)
	go func() {
		_, err := c.Run(testCtx(t), "echo $$ > "+pidFile+".tmp && mv "+pidFile+".tmp "+pidFile+"; exec sleep 60", nil)
		done <- err
	}()
	waitForPID(t, pidFile)
	srv.DropConnections()
	err := <-done
	// The command did start: the caller must not take this for a safe retry.
	if !errors.Is(err, sshx.ErrConnectionLost) || errors.Is(err, sshx.ErrNotStarted) {
		t.Errorf("Run when the connection drops: %v, want ErrConnectionLost and not ErrNotStarted", err)
	}
}

func TestRunEndsWhenPeerGoesSilent(t *testing.T) {
	srv := sshtest.NewServer(t)
	c := client(t, newPool(t, srv, func(c *sshx.Config) { c.KeepAlive = 20 * time.Millisecond }), srv.Addr)
	pidFile := filepath.Join(t.TempDir(), "pid")
	done := make(chan error, 1)
	go func() {
		_, err := c.Run(testCtx(t), "echo $$ > "+pidFile+".tmp && mv "+pidFile+".tmp "+pidFile+"; exec sleep 60", nil)
		done <- err
	}()
	waitForPID(t, pidFile)
	srv.Stall() // the host stops answering; the TCP connection stays open
	select {
	case err := <-done:
		if !errors.Is(err, sshx.ErrConnectionLost) || !strings.Contains(err.Error(), "keep-alive") {
			t.Errorf("Run when the peer went silent: %v, want ErrConnectionLost naming the keep-alive", err)
		}
	case <-testCtx(t).Done():
		t.Fatal("Run still waiting on a silent peer")
	}
}
