package stager

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/gridwire/gridwire/events"
)

// endpoint is one end of a copy: a job's working directory or a remote store. Names are
// slash-separated; for a working directory they are relative to it and already checked
// by localName.
type endpoint interface {
	// open reads a file; size is -1 when unknown.
	open(ctx context.Context, name string) (r io.ReadCloser, size int64, err error)
	// put creates or replaces a file with r's content, making parent directories.
	put(ctx context.Context, name string, r io.Reader, size int64) error
	// list names every file under dir, relative to it, slash-separated and sorted.
	list(ctx context.Context, dir string) ([]string, error)
}

// streamer is an endpoint that pushes a file into a writer faster than it can be read
// (pkg/sftp keeps many reads in flight while it writes). size is -1 when unknown.
type streamer interface {
	openStream(ctx context.Context, name string) (src io.WriterTo, size int64, close func() error, err error)
}

// fileWriter is an endpoint that hands out a writer for a new file (parents made).
type fileWriter interface {
	writeFile(ctx context.Context, name string) (io.WriteCloser, error)
}

// workDir is a job's working directory on its target.
type workDir interface {
	endpoint
	// create makes the working directory (and gridwire's control directory) if missing.
	create(ctx context.Context) error
	// removeAll deletes a name (a file or a whole directory); a missing name is no error.
	removeAll(ctx context.Context, name string) error
	// makeExecutable sets a staged file's mode to 0755 (the job's program).
	makeExecutable(ctx context.Context, name string) error
	io.Closer
}

// osFS adapts package os to linkReader.
type osFS struct{}

func (osFS) Lstat(name string) (fs.FileInfo, error) { return os.Lstat(name) }
func (osFS) ReadLink(name string) (string, error)   { return os.Readlink(name) }

// localDir is a working directory on the gateway's own disk (a fork cluster). Every
// operation on a name goes through an os.Root, which refuses names that escape it even
// if a symlink appears between the check and the use. The root is opened (and the
// directory's real path resolved) only when a file is moved: a job that stages nothing
// costs its two mkdirs and nothing else.
type localDir struct {
	dir  string
	bare bool       // no control directory: a job directory of the job's choosing
	mu   sync.Mutex // guards made and the lazy opening of real and root
	made bool
	real string // dir with symlinks resolved, for confinement checks
	root *os.Root
}

func openLocalDir(dir string) *localDir { return &localDir{dir: filepath.Clean(dir)} }

func (l *localDir) create(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.makeLocked()
}

// makeLocked makes the directory and, unless bare, its control directory: one mkdir
// each when the parent exists, where MkdirAll would first stat every level up to the
// first that exists. Anything else (a parent missing, the directory already there) goes
// to MkdirAll, which says what is wrong exactly as before.
func (l *localDir) makeLocked() error {
	if l.made {
		return nil
	}
	mk := func(dir string, err error) error {
		if err != nil {
			err = os.MkdirAll(dir, 0o755)
		}
		if err != nil {
			return fmt.Errorf("making working directory: %w", err)
		}
		return nil
	}
	if err := mk(l.dir, os.Mkdir(l.dir, 0o755)); err != nil {
		return err
	}
	if !l.bare {
		ctl := filepath.Join(l.dir, filepath.FromSlash(controlDir()))
		if err := mk(ctl, os.Mkdir(ctl, 0o755)); err != nil {
			return err
		}
	}
	l.made = true
	return nil
}

// opened makes the directory if need be and opens its root.
func (l *localDir) opened() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.makeLocked(); err != nil {
		return err
	}
	if l.root != nil {
		return nil
	}
	real, err := filepath.EvalSymlinks(l.dir)
	if err != nil {
		return fmt.Errorf("resolving working directory: %w", err)
	}
	root, err := os.OpenRoot(l.dir)
	if err != nil {
		return fmt.Errorf("opening working directory: %w", err)
	}
	l.real, l.root = filepath.ToSlash(real), root
	return nil
}

func (l *localDir) check(ctx context.Context, name string) error {
	if err := l.opened(); err != nil {
		return err
	}
	return confine(osFS{}, l.real, name)
}

func (l *localDir) open(ctx context.Context, name string) (io.ReadCloser, int64, error) {
	if err := l.check(ctx, name); err != nil {
		return nil, 0, err
	}
	f, err := l.root.Open(filepath.FromSlash(name))
	if err != nil {
		return nil, 0, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, 0, fmt.Errorf("%s is not a regular file", name)
	}
	return f, fi.Size(), nil
}

func (l *localDir) put(ctx context.Context, name string, r io.Reader, size int64) error {
	f, err := l.writeFile(ctx, name)
	if err != nil {
		return err
	}
	return errors.Join(copyBuffered(f, r), f.Close())
}

func (l *localDir) writeFile(ctx context.Context, name string) (io.WriteCloser, error) {
	if err := l.check(ctx, name); err != nil {
		return nil, err
	}
	name = filepath.FromSlash(name)
	if dir := filepath.Dir(name); dir != "." {
		if err := l.root.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
	}
	return l.root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
}

// copyBuffer is the buffer large copies use: fewer, larger reads and writes.
const copyBuffer = 1 << 20

// copyBuffered copies with a large buffer (hiding the file's ReadFrom, which would fall
// back to 32 KiB reads for a reader that is not a file).
func copyBuffered(w io.Writer, r io.Reader) error {
	_, err := io.CopyBuffer(struct{ io.Writer }{w}, r, make([]byte, copyBuffer))
	return err
}

func (l *localDir) list(ctx context.Context, dir string) ([]string, error) {
	if err := l.check(ctx, dir); err != nil {
		return nil, err
	}
	return walkFS(l.root.FS(), dir)
}

func (l *localDir) removeAll(ctx context.Context, name string) error {
	if err := l.check(ctx, name); err != nil {
		return err
	}
	return l.root.RemoveAll(filepath.FromSlash(name))
}

func (l *localDir) makeExecutable(ctx context.Context, name string) error {
	if err := l.check(ctx, name); err != nil {
		return err
	}
	return l.root.Chmod(filepath.FromSlash(name), 0o755)
}

func (l *localDir) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.root == nil {
		return nil
	}
	err := l.root.Close()
	l.root = nil
	return err
}

// walkFS lists the files under dir (regular files and symlinks, which open checks).
func walkFS(fsys fs.FS, dir string) ([]string, error) {
	var names []string
	err := fs.WalkDir(fsys, dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			names = append(names, strings.TrimPrefix(p, dir+"/"))
		}
		return nil
	})
	sort.Strings(names)
	return names, err
}

func controlDir() string { return events.ControlDir }
