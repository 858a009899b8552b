package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
)

// natsServer is an official nats-server process a --scale run keeps its log in
// (--nats-server): the cluster deployment, where the server's memory is not serve's.
// Its store directory is the scale directory's jetstream/, as the embedded server's is
// (pkg/bus), so a log built by either is reused by both.
type natsServer struct {
	cmd  *exec.Cmd
	url  string
	done chan struct{}
}

// startNATSServer starts bin with JetStream on dir, on a free loopback port, and waits
// until it accepts connections (recovering a large store takes a while).
func startNATSServer(ctx context.Context, bin, dir string) (*natsServer, error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	logf, err := os.Create(filepath.Join(dir, "nats-server.log"))
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd := exec.Command(bin, "--jetstream", "--store_dir", filepath.Join(dir, "jetstream"), "--addr", "127.0.0.1", "--port", strconv.Itoa(port),
		"--server_name", "gridwire-bench")
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // never outlives the bench
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("--nats-server: %w", err)
	}
	s := &natsServer{cmd: cmd, url: fmt.Sprintf("nats://127.0.0.1:%d", port), done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(s.done) }()
	deadline := time.Now().Add(10 * time.Minute)
	for {
		nc, err := nats.Connect(s.url, nats.Timeout(time.Second))
		if err == nil {
			_, err = nc.JetStream()
			nc.Close()
			if err == nil {
				return s, nil
			}
		}
		select {
		case <-s.done:
			return nil, fmt.Errorf("--nats-server %s exited at start; its log is %s", bin, filepath.Join(dir, "nats-server.log"))
		case <-ctx.Done():
			s.stop()
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.stop()
			return nil, fmt.Errorf("--nats-server %s: not accepting connections after 10 minutes", bin)
		}
	}
}

// stop ends the server (SIGTERM, then SIGKILL after 30 s) and waits for it.
func (s *natsServer) stop() {
	if s == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(30 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
}

// rss is the server's resident set in MiB (0: no server, or it could not be read).
func (s *natsServer) rss() float64 {
	if s == nil {
		return 0
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseFloat(f[1], 64)
			return kb / 1024
		}
	}
	return 0
}

// scaleBus is how a --scale run reaches the log in dir: the embedded server on it, or
// the external one (--nats-server).
func (o *benchOpts) scaleBus(dir string) *busFlags {
	return &busFlags{data: dir, natsURL: o.natsURL, logLevel: "error", stateCacheMiB: 256}
}
