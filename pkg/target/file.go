package target

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
)

// Chunk is a piece of a file that may still be growing (a running job's output): the
// bytes read from an offset, and the file's size when they were read.
type Chunk struct {
	Data []byte
	Size int64
}

// ReadFrom reads up to max bytes of the file at path on this host, from offset. A
// missing file is an error that matches fs.ErrNotExist; an offset past the end reads
// nothing (the file was truncated or replaced: Size says so).
func (Local) ReadFrom(ctx context.Context, path string, offset int64, max int) (Chunk, error) {
	if err := ctx.Err(); err != nil {
		return Chunk{}, err
	}
	f, err := os.Open(path)
	if err != nil {
		return Chunk{}, err
	}
	defer f.Close()
	return readChunk(f, offset, max)
}

// ReadFrom reads up to max bytes of the file at path on the remote host over SFTP, on
// the pool's connection to it, from offset; as Local.ReadFrom otherwise.
func (s SSH) ReadFrom(ctx context.Context, path string, offset int64, max int) (Chunk, error) {
	c, err := s.Pool.Client(ctx, s.Addr)
	if err != nil {
		return Chunk{}, err
	}
	sc, err := c.SFTP(ctx)
	if err != nil {
		return Chunk{}, err
	}
	f, err := sc.Open(path)
	if err != nil {
		return Chunk{}, fmt.Errorf("reading %s on %s: %w", path, s.Addr, err)
	}
	defer f.Close()
	ch, err := readChunk(f, offset, max)
	if err != nil {
		return ch, fmt.Errorf("reading %s on %s: %w", path, s.Addr, err)
	}
	return ch, nil
}

// file is what readChunk needs of a local or an SFTP file.
type file interface {
	io.ReaderAt
	Stat() (os.FileInfo, error)
}

func readChunk(f file, offset int64, max int) (Chunk, error) {
	fi, err := f.Stat()
	if err != nil {
		return Chunk{}, err
	}
	ch := Chunk{Size: fi.Size()}
	if offset < 0 || offset >= ch.Size || max <= 0 {
		return ch, nil
	}
	buf := make([]byte, min(int64(max), ch.Size-offset))
	n, err := f.ReadAt(buf, offset)
	if err != nil && !errors.Is(err, io.EOF) {
		return ch, err
	}
	ch.Data = buf[:n]
	return ch, nil
}
