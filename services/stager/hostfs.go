package stager

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
)

// hostFS serves file:// URLs and absolute plain paths: files on the gateway's own disk.
// When roots are configured a name must resolve inside one of them.
type hostFS struct{ roots []string }

// ErrFileRoot refuses a file URL outside the configured file roots.
var ErrFileRoot = errors.New("stager: file is outside every configured file root")

func (h hostFS) check(name string) error {
	if len(h.roots) == 0 {
		return nil
	}
	for _, r := range h.roots {
		real, err := filepath.EvalSymlinks(r)
		if err != nil {
			continue
		}
		r = filepath.ToSlash(filepath.Clean(r))
		if !within(r, name) {
			continue
		}
		rel := name[len(r):]
		if confine(osFS{}, filepath.ToSlash(real), rel) == nil {
			return nil
		}
	}
	return fmt.Errorf("%w: %s", ErrFileRoot, name)
}

func (h hostFS) open(ctx context.Context, name string) (io.ReadCloser, int64, error) {
	if err := h.check(name); err != nil {
		return nil, 0, err
	}
	f, err := os.Open(filepath.FromSlash(name))
	if err != nil {
		return nil, 0, err
	}
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return nil, 0, errors.Join(err, fmt.Errorf("%s is not a regular file", name))
	}
	return f, fi.Size(), nil
}

func (h hostFS) put(ctx context.Context, name string, r io.Reader, size int64) error {
	f, err := h.writeFile(ctx, name)
	if err != nil {
		return err
	}
	return errors.Join(copyBuffered(f, r), f.Close())
}

func (h hostFS) writeFile(ctx context.Context, name string) (io.WriteCloser, error) {
	if err := h.check(name); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(path.Dir(name), 0o755); err != nil {
		return nil, err
	}
	return os.Create(filepath.FromSlash(name))
}

func (h hostFS) list(ctx context.Context, dir string) ([]string, error) {
	dir = path.Clean(dir)
	if err := h.check(dir); err != nil {
		return nil, err
	}
	return walkFS(os.DirFS(dir), ".")
}
