package stager

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"strings"
	"time"
)

// ErrTooLarge refuses a transfer over the configured size limit.
var ErrTooLarge = errors.New("stager: file exceeds the size limit")

// copied is the outcome of one successful copy.
type copied struct {
	bytes int64
	sum   string // SHA-256 of the file, or of the manifest of a directory
	files int
}

// copier moves one file or directory between endpoints, hashing as it streams.
type copier struct {
	limit int64         // bytes per item; 0 = none
	idle  time.Duration // an attempt with no progress for this long is cancelled; 0 = never
}

// copyItem copies src:from to dst:to; dir copies every file below from.
func (c copier) copyItem(ctx context.Context, src endpoint, from string, dst endpoint, to string, dir bool) (copied, error) {
	if !dir {
		return c.copyFile(ctx, src, from, dst, to, 0)
	}
	names, err := src.list(ctx, from)
	if err != nil {
		return copied{}, fmt.Errorf("listing %s: %w", from, err)
	}
	// The directory's checksum is over its manifest: "<sha256>  <name>\n" per file, sorted.
	manifest := sha256.New()
	var out copied
	for _, n := range names {
		one, err := c.copyFile(ctx, src, joinName(from, n), dst, joinName(to, n), out.bytes)
		out.bytes += one.bytes
		if err != nil {
			return out, fmt.Errorf("%s: %w", n, err)
		}
		fmt.Fprintf(manifest, "%s  %s\n", one.sum, n)
		out.files++
	}
	out.sum = hex.EncodeToString(manifest.Sum(nil))
	return out, nil
}

// copyFile streams one file; already counts bytes earlier files of a directory used.
func (c copier) copyFile(ctx context.Context, src endpoint, from string, dst endpoint, to string, already int64) (copied, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	r, size, err := src.open(ctx, from)
	if err != nil {
		return copied{}, fmt.Errorf("opening %s: %w", from, err)
	}
	defer r.Close()
	if c.limit > 0 && size > 0 && already+size > c.limit {
		return copied{}, fmt.Errorf("%w: %s is %d bytes, limit %d", ErrTooLarge, from, already+size, c.limit)
	}
	m := &meter{r: r, h: sha256.New(), limit: c.limit - already, unlimited: c.limit <= 0, copier: c}
	if c.idle > 0 {
		m.idle = time.AfterFunc(c.idle, func() { cancel(fmt.Errorf("no progress for %s", c.idle)) })
		defer m.idle.Stop()
	}
	err = dst.put(ctx, to, m, size)
	if cause := context.Cause(ctx); err != nil && cause != nil && !errors.Is(cause, context.Canceled) {
		err = fmt.Errorf("%w (%v)", err, cause)
	}
	if err == nil && m.err != nil {
		err = m.err
	}
	if err == nil && size >= 0 && m.n != size {
		err = fmt.Errorf("short copy of %s: %d of %d bytes", from, m.n, size)
	}
	if err != nil {
		return copied{bytes: m.n}, fmt.Errorf("copying %s to %s: %w", from, to, err)
	}
	return copied{bytes: m.n, sum: hex.EncodeToString(m.h.Sum(nil)), files: 1}, nil
}

// meter counts, hashes and bounds what flows through it, and keeps the attempt alive.
type meter struct {
	r         io.Reader
	h         hash.Hash
	n         int64
	limit     int64
	unlimited bool
	err       error
	idle      *time.Timer
	copier
}

func (m *meter) Read(p []byte) (int, error) {
	if !m.unlimited && int64(len(p)) > m.limit-m.n+1 {
		p = p[:m.limit-m.n+1]
	}
	k, err := m.r.Read(p)
	m.h.Write(p[:k])
	m.n += int64(k)
	if !m.unlimited && m.n > m.limit {
		m.err = fmt.Errorf("%w: more than %d bytes", ErrTooLarge, m.limit)
		return k, m.err
	}
	if k > 0 {
		m.progress()
	}
	return k, err
}

func (m *meter) progress() {
	if m.idle != nil {
		m.idle.Reset(m.copier.idle)
	}
}

// joinName puts a file below a directory name, which may be a URL (so no path.Join,
// which would fold the "//" after the scheme).
func joinName(dir, name string) string { return strings.TrimSuffix(dir, "/") + "/" + name }
