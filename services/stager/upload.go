package stager

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/oklog/ulid/v2"
)

// UploadOptions tune Upload.
type UploadOptions struct {
	// Dir is what relative local paths are relative to; "" is the current directory.
	Dir string
	// Wrap, when set, wraps each file's reader as it is uploaded (a progress bar).
	Wrap func(name string, size int64, r io.Reader) io.Reader
	// Getenv, when set, expands a name that starts with an environment variable
	// ($DDS_LOCATION/..., ${DDS_LOCATION}/...) from the submitter's environment before
	// the file is read, as DDS's commander expands an unreachable exe's path on its own
	// host. The name the description writes stays the upload's key. A variable that is
	// not set is an error naming it; nil leaves names as written.
	Getenv func(string) (string, bool)
}

// Put stores one uploaded file under an object name of UploadBucket.
type Put func(ctx context.Context, name string, r io.Reader) error

// BucketPut stores uploads straight into the object store (a client with NATS access).
func BucketPut(js jetstream.JetStream) Put {
	var obs jetstream.ObjectStore
	return func(ctx context.Context, name string, r io.Reader) error {
		if obs == nil {
			var err error
			if obs, err = EnsureUploadBucket(ctx, js); err != nil {
				return err
			}
		}
		_, err := obs.Put(ctx, jetstream.ObjectMeta{Name: name}, r)
		return err
	}
}

// Upload uploads the local files and directories names (as a description writes
// them, relative to opt.Dir) through put, a directory file by file, and returns the
// object each name was uploaded as (ending in '/' for a directory) and how many files it
// uploaded. A submitter hands the map in with its description (ingest.Uploads), and
// ingest turns those names into gridwire-upload URLs as it parses.
func Upload(ctx context.Context, put Put, names []string, opt UploadOptions) (map[string]string, int, error) {
	objects := make(map[string]string, len(names))
	n := 0
	for _, local := range names {
		if _, done := objects[local]; done {
			continue
		}
		file, err := expandLeadingVar(local, opt.Getenv)
		if err != nil { // the submitter's input, as a missing file is: a *fs.PathError
			return objects, n, &fs.PathError{Op: "uploading", Path: local, Err: err}
		}
		name, k, err := uploadPath(ctx, put, localPath(opt.Dir, file), opt.Wrap)
		n += k
		if err != nil {
			return objects, n, fmt.Errorf("uploading %s: %w", local, err)
		}
		objects[local] = name
	}
	return objects, n, nil
}

// expandLeadingVar replaces a leading $NAME or ${NAME} (followed by '/' or the end) with
// its value from getenv; other names, and every name when getenv is nil, stay as they are.
func expandLeadingVar(p string, getenv func(string) (string, bool)) (string, error) {
	if getenv == nil || !strings.HasPrefix(p, "$") {
		return p, nil
	}
	rest := p[1:]
	var name string
	if strings.HasPrefix(rest, "{") {
		end := strings.IndexByte(rest, '}')
		if end < 0 {
			return p, nil
		}
		name, rest = rest[1:end], rest[end+1:]
	} else {
		end := strings.IndexFunc(rest, func(r rune) bool {
			return !(r == '_' || r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9')
		})
		if end < 0 {
			end = len(rest)
		}
		name, rest = rest[:end], rest[end:]
	}
	if name == "" || rest != "" && rest[0] != '/' {
		return p, nil
	}
	value, ok := getenv(name)
	if !ok || value == "" {
		return "", fmt.Errorf("the path starts with $%s, which is not set in the submitter's environment", name)
	}
	return value + rest, nil
}

func localPath(dir, p string) string {
	if filepath.IsAbs(p) || dir == "" {
		return p
	}
	return filepath.Join(dir, p)
}

// uploadPath uploads a file as <ulid>/<base>, or a directory's files under <ulid>/<base>/,
// and returns the object name (ending in '/' for a directory).
func uploadPath(ctx context.Context, put Put, p string, wrap func(string, int64, io.Reader) io.Reader) (string, int, error) {
	fi, err := os.Stat(p)
	if err != nil {
		return "", 0, err
	}
	prefix := ulid.Make().String() + "/" + filepath.Base(p)
	if !fi.IsDir() {
		return prefix, 1, uploadFile(ctx, put, p, prefix, wrap)
	}
	n := 0
	err = filepath.WalkDir(p, func(f string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		rel, err := filepath.Rel(p, f)
		if err != nil {
			return err
		}
		n++
		return uploadFile(ctx, put, f, path.Join(prefix, filepath.ToSlash(rel)), wrap)
	})
	return prefix + "/", n, err
}

func uploadFile(ctx context.Context, put Put, p, name string, wrap func(string, int64, io.Reader) io.Reader) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	var r io.Reader = f
	if wrap != nil {
		r = wrap(p, fi.Size(), f)
	}
	return put(ctx, name, r)
}
