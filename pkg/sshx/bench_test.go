package sshx_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"io"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/gridwire/gridwire/pkg/sshx/sshtest"
)

// BenchmarkRunTrue runs `true` over one pooled connection, one command at a time: the
// per-command cost of a session (open, exec, exit status, close) plus the server's fork.
func BenchmarkRunTrue(b *testing.B) {
	srv := sshtest.NewServer(b)
	c := client(b, newPool(b, srv), srv.Addr)
	ctx := context.Background()
	b.ResetTimer()
	for b.Loop() {
		if res, err := c.Run(ctx, "true", nil); err != nil || res.ExitCode != 0 {
			b.Fatalf("Run: %v, exit %d", err, res.ExitCode)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "cmds/s")
}

// BenchmarkRunTrueParallel runs `true` from many goroutines over one pooled connection
// (MaxSessionsPerConn sessions at once).
func BenchmarkRunTrueParallel(b *testing.B) {
	srv := sshtest.NewServer(b)
	pool := newPool(b, srv)
	client(b, pool, srv.Addr)
	b.SetParallelism(4)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		for pb.Next() {
			c, err := pool.Client(ctx, srv.Addr)
			if err != nil {
				b.Fatal(err)
			}
			if res, err := c.Run(ctx, "true", nil); err != nil || res.ExitCode != 0 {
				b.Fatalf("Run: %v, exit %d", err, res.ExitCode)
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "cmds/s")
	if srv.Accepted() != 1 {
		b.Errorf("%d connections, want 1", srv.Accepted())
	}
}

const benchFileSize = 32 << 20

// BenchmarkSFTPUpload streams 32 MiB from a reader of unknown size to the server's disk.
func BenchmarkSFTPUpload(b *testing.B) {
	srv := sshtest.NewServer(b)
	c := client(b, newPool(b, srv), srv.Addr)
	data := randomBytes(b, benchFileSize)
	remote := filepath.Join(srv.Home, "bench.bin")
	ctx := context.Background()
	b.SetBytes(benchFileSize)
	b.ResetTimer()
	for b.Loop() {
		if _, err := c.Upload(ctx, io.MultiReader(bytes.NewReader(data)), remote, 0o600); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSFTPDownload streams a 32 MiB file from the server's disk to io.Discard.
func BenchmarkSFTPDownload(b *testing.B) {
	srv := sshtest.NewServer(b)
	c := client(b, newPool(b, srv), srv.Addr)
	remote := filepath.Join(srv.Home, "bench.bin")
	ctx := context.Background()
	if _, err := c.Upload(ctx, bytes.NewReader(randomBytes(b, benchFileSize)), remote, 0o600); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(benchFileSize)
	b.ResetTimer()
	for b.Loop() {
		if n, err := c.Download(ctx, remote, io.Discard); err != nil || n != benchFileSize {
			b.Fatalf("Download = %d, %v", n, err)
		}
	}
}

func randomBytes(b *testing.B, n int) []byte {
	data := make([]byte, n)
	rand.Read(data)
	return data
}

// BenchmarkSFTPSmallFiles uploads 4 KiB files one after another: the per-file cost
// (open, chmod, write, close round trips) that dominates staging many small inputs.
func BenchmarkSFTPSmallFiles(b *testing.B) {
	srv := sshtest.NewServer(b)
	c := client(b, newPool(b, srv), srv.Addr)
	data := randomBytes(b, 4<<10)
	ctx := context.Background()
	if err := c.MkdirAll(ctx, filepath.Join(srv.Home, "small")); err != nil {
		b.Fatal(err)
	}
	i := 0
	b.ResetTimer()
	for b.Loop() {
		remote := filepath.Join(srv.Home, "small", strconv.Itoa(i%1000))
		i++
		if _, err := c.Upload(ctx, bytes.NewReader(data), remote, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "files/s")
}
