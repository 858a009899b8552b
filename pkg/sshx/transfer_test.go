package sshx_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gridwire/gridwire/pkg/sshx/sshtest"
)

func TestSFTPRoundTrip(t *testing.T) {
	srv := sshtest.NewServer(t)
	c := client(t, newPool(t, srv), srv.Addr)
	ctx := testCtx(t)
	big := make([]byte, 5<<20+123)
	rand.Read(big)
	for name, data := range map[string][]byte{"5MiB": big, "empty": {}, "small": []byte("hello\n")} {
		t.Run(name, func(t *testing.T) {
			remote := filepath.Join(srv.Home, "up", name)
			if err := c.MkdirAll(ctx, filepath.Dir(remote)); err != nil {
				t.Fatal(err)
			}
			// An io.Reader with no size: the upload must stream, not ask for a length.
			n, err := c.Upload(ctx, io.MultiReader(bytes.NewReader(data)), remote, 0o640)
			if err != nil || n != int64(len(data)) {
				t.Fatalf("Upload = %d, %v; want %d", n, err, len(data))
			}
			onDisk, err := os.ReadFile(remote)
			if err != nil || sha256.Sum256(onDisk) != sha256.Sum256(data) {
				t.Fatalf("uploaded file differs (%d bytes, err %v)", len(onDisk), err)
			}
			if st, _ := os.Stat(remote); st.Mode().Perm() != 0o640 {
				t.Errorf("uploaded mode %v, want 0640", st.Mode().Perm())
			}
			h := sha256.New()
			n, err = c.Download(ctx, remote, h)
			if err != nil || n != int64(len(data)) {
				t.Fatalf("Download = %d, %v; want %d", n, err, len(data))
			}
			if want := sha256.Sum256(data); !bytes.Equal(h.Sum(nil), want[:]) {
				t.Error("downloaded SHA-256 differs")
			}
		})
	}
}

func TestSFTPFileHelpers(t *testing.T) {
	srv := sshtest.NewServer(t)
	c := client(t, newPool(t, srv), srv.Addr)
	ctx := testCtx(t)
	local := filepath.Join(t.TempDir(), "job.sh")
	data := make([]byte, 300<<10)
	rand.Read(data)
	if err := os.WriteFile(local, data, 0o750); err != nil {
		t.Fatal(err)
	}
	// Relative remote paths are relative to the login directory, as with OpenSSH.
	if err := c.MkdirAll(ctx, "a/b/c"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.UploadFile(ctx, local, "a/b/c/job.sh"); err != nil {
		t.Fatal(err)
	}
	remote := filepath.Join(srv.Home, "a/b/c/job.sh")
	if st, err := os.Stat(remote); err != nil || st.Mode().Perm() != 0o750 {
		t.Fatalf("remote file: %v, %v; want mode 0750", st, err)
	}
	back := filepath.Join(t.TempDir(), "back.sh")
	if _, err := c.DownloadFile(ctx, remote, back); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(back)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("downloaded file differs (err %v)", err)
	}
	if st, _ := os.Stat(back); st.Mode().Perm() != 0o750 {
		t.Errorf("downloaded mode %v, want 0750", st.Mode().Perm())
	}
	entries, _ := os.ReadDir(filepath.Dir(back))
	if len(entries) != 1 {
		t.Errorf("download left %d files beside the target, want only it", len(entries))
	}
	if _, err := c.DownloadFile(ctx, filepath.Join(srv.Home, "missing"), filepath.Join(t.TempDir(), "x")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("DownloadFile of a missing file: %v, want os.ErrNotExist", err)
	}
}

func TestSFTPClientCachedPerConnection(t *testing.T) {
	srv := sshtest.NewServer(t)
	c := client(t, newPool(t, srv), srv.Addr)
	a, err := c.SFTP(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.SFTP(testCtx(t))
	if err != nil || a != b {
		t.Fatalf("second SFTP() = %p, %v; want the cached %p", b, err, a)
	}
	// A failed subsystem is replaced, not handed out again.
	a.Close()
	for {
		b, err = c.SFTP(testCtx(t))
		if err != nil {
			t.Fatal(err)
		}
		if b != a {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if _, err := b.Getwd(); err != nil {
		t.Errorf("replacement SFTP client: %v", err)
	}
}

func TestUploadStopsWhenCancelled(t *testing.T) {
	srv := sshtest.NewServer(t)
	c := client(t, newPool(t, srv), srv.Addr)
	ctx, cancel := context.WithCancel(testCtx(t))
	// A reader that cancels after the first MiB: the upload must stop there.
	r := &cancellingReader{r: rand.Reader, after: 1 << 20, cancel: cancel}
	n, err := c.Upload(ctx, r, filepath.Join(srv.Home, "endless"), 0o600)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Upload = %d, %v; want context.Canceled", n, err)
	}
	if n > 4<<20 {
		t.Errorf("uploaded %d bytes after the cancel", n)
	}
}

type cancellingReader struct {
	r      io.Reader
	read   int
	after  int
	cancel func()
}

func (c *cancellingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.read += n
	if c.read >= c.after {
		c.cancel()
	}
	return n, err
}
