package sshx

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/pkg/sftp"
)

// SFTP returns the connection's SFTP client, starting the subsystem on first use; it
// holds one of the connection's session slots for as long as it lives. Callers share it
// and must not Close it. If it fails, the next call starts a new one.
func (c *Client) SFTP(ctx context.Context) (*sftp.Client, error) {
	if sc := c.cachedSFTP(); sc != nil {
		return sc, nil
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("sshx: starting SFTP on %s: %w", c.host, err)
	}
	select {
	case c.sftpLock <- struct{}{}:
		defer func() { <-c.sftpLock }()
	case <-ctx.Done():
		return nil, fmt.Errorf("sshx: starting SFTP on %s: %w", c.host, ctx.Err())
	}
	if sc := c.cachedSFTP(); sc != nil { // started while this call waited
		return sc, nil
	}
	release, err := c.acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("sshx: starting SFTP on %s: %w", c.host, err)
	}
	type started struct {
		sc  *sftp.Client
		err error
	}
	ch := make(chan started, 1)
	go func() {
		sc, err := sftp.NewClient(c.conn, sftp.UseConcurrentWrites(true))
		ch <- started{sc, err}
	}()
	select {
	case r := <-ch:
		if r.err != nil {
			release()
			return nil, fmt.Errorf("sshx: starting SFTP on %s: %w", c.host, r.err)
		}
		if !c.adoptSFTP(r.sc, release) {
			r.sc.Close()
			release()
			return nil, fmt.Errorf("sshx: starting SFTP on %s: %w", c.host, ErrPoolClosed)
		}
		return r.sc, nil
	case <-ctx.Done():
		go func() {
			if r := <-ch; r.sc != nil {
				r.sc.Close()
			}
			release()
		}()
		return nil, fmt.Errorf("sshx: starting SFTP on %s: %w", c.host, ctx.Err())
	}
}

func (c *Client) cachedSFTP() *sftp.Client {
	c.sftpMu.Lock()
	defer c.sftpMu.Unlock()
	return c.sftp
}

// adoptSFTP caches sc until it ends, then frees its session slot. It reports false,
// adopting nothing, once the pool is closed.
func (c *Client) adoptSFTP(sc *sftp.Client, release func()) bool {
	c.sftpMu.Lock()
	defer c.sftpMu.Unlock()
	watching := c.pool.goOwned(func() {
		sc.Wait()
		c.sftpMu.Lock()
		if c.sftp == sc {
			c.sftp = nil
		}
		c.sftpMu.Unlock()
		release()
	})
	if watching {
		c.sftp = sc
	}
	return watching
}

// Upload streams r into remotePath (created or truncated, then given mode's permission
// bits) with many SFTP writes in flight, and returns the bytes written. It stops at the
// first read after ctx ends. A failed upload leaves a partial file behind.
func (c *Client) Upload(ctx context.Context, r io.Reader, remotePath string, mode os.FileMode) (int64, error) {
	sc, err := c.SFTP(ctx)
	if err != nil {
		return 0, err
	}
	f, err := sc.OpenFile(remotePath, os.O_WRONLY|os.O_CREATE|os.O_TRUNC)
	if err != nil {
		return 0, c.transferError("uploading to", remotePath, err)
	}
	if err := f.Chmod(mode.Perm()); err != nil {
		f.Close()
		return 0, c.transferError("uploading to", remotePath, err)
	}
	n, err := f.ReadFromWithConcurrency(ctxReader{ctx, r}, 0)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return n, c.transferError("uploading to", remotePath, err)
	}
	return n, nil
}

// Download streams remotePath into w with many SFTP reads in flight and returns the
// bytes written. It stops at the first write after ctx ends.
func (c *Client) Download(ctx context.Context, remotePath string, w io.Writer) (int64, error) {
	sc, err := c.SFTP(ctx)
	if err != nil {
		return 0, err
	}
	f, err := sc.Open(remotePath)
	if err != nil {
		return 0, c.transferError("downloading", remotePath, err)
	}
	defer f.Close()
	n, err := f.WriteTo(ctxWriter{ctx, w})
	if err != nil {
		return n, c.transferError("downloading", remotePath, err)
	}
	return n, nil
}

// UploadFile uploads the local file localPath to remotePath with the local file's
// permission bits.
func (c *Client) UploadFile(ctx context.Context, localPath, remotePath string) (int64, error) {
	f, err := os.Open(localPath)
	if err != nil {
		return 0, fmt.Errorf("sshx: uploading %s: %w", localPath, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, fmt.Errorf("sshx: uploading %s: %w", localPath, err)
	}
	return c.Upload(ctx, f, remotePath, st.Mode())
}

// DownloadFile downloads remotePath to localPath with the remote file's permission
// bits. The file appears at localPath only complete: it is written beside it under a
// temporary name and renamed.
func (c *Client) DownloadFile(ctx context.Context, remotePath, localPath string) (int64, error) {
	sc, err := c.SFTP(ctx)
	if err != nil {
		return 0, err
	}
	st, err := sc.Stat(remotePath)
	if err != nil {
		return 0, c.transferError("downloading", remotePath, err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(localPath), "."+filepath.Base(localPath)+".part-*")
	if err != nil {
		return 0, fmt.Errorf("sshx: downloading to %s: %w", localPath, err)
	}
	n, err := c.Download(ctx, remotePath, tmp)
	if err == nil {
		err = tmp.Chmod(st.Mode().Perm())
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), localPath)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return n, fmt.Errorf("sshx: downloading to %s: %w", localPath, err)
	}
	return n, nil
}

// MkdirAll creates dir and any missing parents on the host, like mkdir -p.
func (c *Client) MkdirAll(ctx context.Context, dir string) error {
	sc, err := c.SFTP(ctx)
	if err != nil {
		return err
	}
	if err := sc.MkdirAll(dir); err != nil {
		return c.transferError("creating directory", dir, err)
	}
	return nil
}

func (c *Client) transferError(doing, remotePath string, err error) error {
	if lost := c.lostErr(err); lost != nil {
		err = lost
	}
	return fmt.Errorf("sshx: %s %s:%s: %w", doing, c.host, remotePath, err)
}

// ctxReader fails reads once ctx has ended, so a long copy stops promptly.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (r ctxReader) Read(p []byte) (int, error) {
	if err := r.ctx.Err(); err != nil {
		return 0, err
	}
	return r.r.Read(p)
}

// ctxWriter fails writes once ctx has ended.
type ctxWriter struct {
	ctx context.Context
	w   io.Writer
}

func (w ctxWriter) Write(p []byte) (int, error) {
	if err := w.ctx.Err(); err != nil {
		return 0, err
	}
	return w.w.Write(p)
}
