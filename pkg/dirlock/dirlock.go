// Package dirlock keeps a directory to one process: an exclusive, non-blocking flock on
// a file inside it, held for the life of the process and released by the kernel when
// the process ends, however it ends. It owns only that lock file.
package dirlock

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// ErrLocked is returned when another process holds the directory.
var ErrLocked = errors.New("dirlock: directory in use by another process")

// FileName is the lock file inside the directory.
const FileName = "LOCK"

// Lock is a held directory lock.
type Lock struct {
	f    *os.File
	path string
}

// Acquire locks dir (creating it if needed) or fails at once with an error wrapping
// ErrLocked that names the directory and the holder's PID when it is known.
func Acquire(dir string) (*Lock, error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("dirlock: creating %s: %w", dir, err)
	}
	path := filepath.Join(dir, FileName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o640)
	if err != nil {
		return nil, fmt.Errorf("dirlock: opening %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder := readPID(f)
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %s is held by process %s", ErrLocked, dir, holder)
		}
		return nil, fmt.Errorf("dirlock: locking %s: %w", path, err)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &Lock{f: f, path: path}, nil
}

func readPID(f *os.File) string {
	buf := make([]byte, 32)
	n, _ := f.ReadAt(buf, 0)
	if pid := strings.TrimSpace(string(buf[:n])); pid != "" {
		return pid
	}
	return "unknown"
}

// Release gives the directory up. It is idempotent.
func (l *Lock) Release() {
	if l == nil || l.f == nil {
		return
	}
	_ = syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN)
	_ = l.f.Close()
	l.f = nil
}
