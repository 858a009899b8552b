package target

import (
	"io/fs"
	"strconv"
	"strings"
	"syscall"
)

// ReadLine reads a value that a job's process writes whole as one line ("<value>\n"): a
// native ID marker, an exit status file. A missing file, one whose line is not finished
// (no newline yet: its writer is at work) or one holding only blanks is not there.
func ReadLine(path string) (string, bool) {
	b, err := readSmall(path)
	if err != nil || len(b) == 0 || b[len(b)-1] != '\n' {
		return "", false
	}
	v := strings.TrimSpace(string(b))
	return v, v != ""
}

// readSmall reads a whole file with the three calls it needs (open, read until the end,
// close), going to the kernel directly: every job's start lock and exit status are read
// this way, and an *os.File (os.ReadFile) adds an fstat and five fcntl and epoll calls.
func readSmall(path string) ([]byte, error) {
	var fd int
	err := retryEINTR(func() (err error) {
		fd, err = syscall.Open(path, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
		return err
	})
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	defer syscall.Close(fd)
	b := make([]byte, 0, 128)
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		var n int
		err := retryEINTR(func() (err error) {
			n, err = syscall.Read(fd, b[len(b):cap(b)])
			return err
		})
		if err != nil {
			return nil, &fs.PathError{Op: "read", Path: path, Err: err}
		}
		if n == 0 {
			return b, nil
		}
		b = b[:len(b)+n]
	}
}

func retryEINTR(fn func() error) error {
	for {
		if err := fn(); err != syscall.EINTR {
			return err
		}
	}
}

// ReadExitStatus parses the exit status file at path ("<code>[ <reason>]\n", written by
// the job's epilogue; the reason is there when the job script ended the program itself);
// a missing, partial or malformed file is not an exit.
func ReadExitStatus(path string) (code int, reason string, ok bool) {
	v, ok := ReadLine(path)
	if !ok {
		return 0, "", false
	}
	return ParseExitLine(v)
}

// ParseExitLine reads an exit status line, "<code>[ <reason>]".
func ParseExitLine(v string) (code int, reason string, ok bool) {
	num, rest, _ := strings.Cut(strings.TrimSpace(v), " ")
	code, err := strconv.Atoi(num)
	if err != nil {
		return 0, "", false
	}
	return code, strings.TrimSpace(rest), true
}
