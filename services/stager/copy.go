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
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"
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
	limit    int64         // bytes per item (a directory's in total); 0 = none
	idle     time.Duration // an attempt with no progress for this long is cancelled; 0 = never
	parallel int           // files of one directory copied at once; 0 = one
}

// copyItem copies src:from to dst:to; dir copies every file below from.
func (c copier) copyItem(ctx context.Context, src endpoint, from string, dst endpoint, to string, dir bool) (copied, error) {
	if !dir {
		return c.copyFile(ctx, src, from, dst, to, new(atomic.Int64))
	}
	names, err := src.list(ctx, from)
	if err != nil {
		return copied{}, fmt.Errorf("listing %s: %w", from, err)
	}
	// Small files are round-trip bound: copy several at once.
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(max(1, c.parallel))
	sums := make([]string, len(names))
	var total atomic.Int64
	for i, n := range names {
		g.Go(func() error {
			one, err := c.copyFile(gctx, src, joinName(from, n), dst, joinName(to, n), &total)
			sums[i] = one.sum
			if err != nil {
				return fmt.Errorf("%s: %w", n, err)
			}
			return nil
		})
	}
	err = g.Wait()
	out := copied{bytes: total.Load()}
	if err != nil {
		return out, err
	}
	// The directory's checksum is over its manifest: "<sha256>  <name>\n" per file, sorted.
	manifest := sha256.New()
	for i, n := range names {
		fmt.Fprintf(manifest, "%s  %s\n", sums[i], n)
	}
	out.sum, out.files = hex.EncodeToString(manifest.Sum(nil)), len(names)
	return out, nil
}

// copyFile streams one file; total counts the bytes of the item (every file of a
// directory), against the limit.
func (c copier) copyFile(ctx context.Context, src endpoint, from string, dst endpoint, to string, total *atomic.Int64) (copied, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	m := &meter{done: ctx.Done(), h: sha256.New(), total: total, limit: c.limit, idleAfter: c.idle}
	if c.idle > 0 {
		m.idle = time.AfterFunc(c.idle, func() { cancel(fmt.Errorf("no progress for %s", c.idle)) })
		defer m.idle.Stop()
	}
	size, err := c.transfer(ctx, src, from, dst, to, m)
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

// transfer moves the bytes through m: pushed by the source into a writer of the
// destination when both can (no pipe in between), else read from the source and put.
func (c copier) transfer(ctx context.Context, src endpoint, from string, dst endpoint, to string, m *meter) (int64, error) {
	if s, ok := src.(streamer); ok {
		if w, ok := dst.(fileWriter); ok {
			return c.stream(ctx, s, from, w, to, m)
		}
	}
	r, size, err := src.open(ctx, from)
	if err != nil {
		return 0, fmt.Errorf("opening %s: %w", from, err)
	}
	defer r.Close()
	if err := c.fits(from, size, m.total); err != nil {
		return size, err
	}
	m.r = r
	return size, dst.put(ctx, to, m, size)
}

func (c copier) stream(ctx context.Context, src streamer, from string, dst fileWriter, to string, m *meter) (int64, error) {
	f, size, closeSrc, err := src.openStream(ctx, from)
	if err != nil {
		return 0, fmt.Errorf("opening %s: %w", from, err)
	}
	defer closeSrc()
	if err := c.fits(from, size, m.total); err != nil {
		return size, err
	}
	w, err := dst.writeFile(ctx, to)
	if err != nil {
		return size, err
	}
	m.w = w
	_, err = f.WriteTo(m)
	return size, errors.Join(err, w.Close())
}

// errInterrupted stops a streaming source whose attempt was cancelled.
var errInterrupted = errors.New("stager: transfer interrupted")

// fits refuses a file whose announced size would take the item over the limit.
func (c copier) fits(name string, size int64, total *atomic.Int64) error {
	if c.limit > 0 && size > 0 && total.Load()+size > c.limit {
		return fmt.Errorf("%w: %s is %d bytes, limit %d", ErrTooLarge, name, total.Load()+size, c.limit)
	}
	return nil
}

// meter counts, hashes and bounds what flows through it, and keeps the attempt alive.
// It is the reader a destination's put reads, or the writer a source streams into.
type meter struct {
	done      <-chan struct{} // the attempt's context is done: stop writing
	r         io.Reader       // reading: the source
	w         io.Writer       // writing: the destination
	h         hash.Hash
	n         int64         // bytes of this file
	total     *atomic.Int64 // bytes of the whole item
	limit     int64         // on total; 0 = none
	err       error
	idle      *time.Timer
	idleAfter time.Duration
}

func (m *meter) Read(p []byte) (int, error) {
	if m.limit > 0 {
		if room := m.limit - m.total.Load() + 1; int64(len(p)) > room {
			p = p[:max(room, 1)]
		}
	}
	k, err := m.r.Read(p)
	if aerr := m.account(p[:k]); aerr != nil {
		return k, aerr
	}
	return k, err
}

func (m *meter) Write(p []byte) (int, error) {
	select {
	case <-m.done:
		return 0, errInterrupted
	default:
	}
	if err := m.account(p); err != nil {
		return 0, err
	}
	return m.w.Write(p)
}

// account hashes and counts bytes that passed, refusing them past the limit.
func (m *meter) account(p []byte) error {
	m.h.Write(p)
	m.n += int64(len(p))
	if t := m.total.Add(int64(len(p))); m.limit > 0 && t > m.limit {
		m.err = fmt.Errorf("%w: more than %d bytes", ErrTooLarge, m.limit)
		return m.err
	}
	if len(p) > 0 && m.idle != nil {
		m.idle.Reset(m.idleAfter)
	}
	return nil
}

// joinName puts a file below a directory name, which may be a URL (so no path.Join,
// which would fold the "//" after the scheme).
func joinName(dir, name string) string { return strings.TrimSuffix(dir, "/") + "/" + name }
