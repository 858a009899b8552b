package target

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/gridwire/gridwire/pkg/cluster"
	"github.com/gridwire/gridwire/pkg/sshx/sshtest"
)

// sshTarget is the SSH runner of a fresh in-process SSH server, closed with the test.
func sshTarget(t *testing.T) SSH {
	t.Helper()
	srv := sshtest.NewServer(t)
	cl := cluster.Cluster{Name: "remote", Kind: cluster.KindSSH, Hosts: []string{srv.Addr}, User: "u",
		Identity: srv.ClientKeyFile, KnownHosts: srv.KnownHostsFile}
	pool, err := NewPool(cl, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pool.Close() })
	return SSH{Pool: pool, Addr: srv.Addr}
}

// Both runners read a growing file piece by piece from an offset, here and over SFTP,
// and tell a missing file by fs.ErrNotExist.
func TestReadFromAGrowingFile(t *testing.T) {
	remote := sshTarget(t)
	readers := map[string]interface {
		ReadFrom(ctx context.Context, path string, offset int64, max int) (Chunk, error)
	}{"local": Local{}, "ssh": remote}
	for name, r := range readers {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			path := filepath.Join(t.TempDir(), "stdout")
			if _, err := r.ReadFrom(ctx, path, 0, 10); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("a missing file: %v, want fs.ErrNotExist", err)
			}
			os.WriteFile(path, []byte("hello, "), 0o600)
			ch, err := r.ReadFrom(ctx, path, 0, 4)
			if err != nil || string(ch.Data) != "hell" || ch.Size != 7 {
				t.Fatalf("first read: %q size %d %v", ch.Data, ch.Size, err)
			}
			f, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
			f.WriteString("world\n")
			f.Close()
			ch, err = r.ReadFrom(ctx, path, 4, 1<<20)
			if err != nil || string(ch.Data) != "o, world\n" || ch.Size != 13 {
				t.Fatalf("after the file grew: %q size %d %v", ch.Data, ch.Size, err)
			}
			ch, err = r.ReadFrom(ctx, path, 13, 1<<20)
			if err != nil || len(ch.Data) != 0 || ch.Size != 13 {
				t.Fatalf("at the end: %q size %d %v", ch.Data, ch.Size, err)
			}
		})
	}
}
