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

	"github.com/gridwire/gridwire/events"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/oklog/ulid/v2"
)

// UploadOptions tune UploadInputs.
type UploadOptions struct {
	// Dir is what relative local paths are relative to; "" is the current directory.
	Dir string
	// Wrap, when set, wraps each file's reader as it is uploaded (a progress bar).
	Wrap func(name string, size int64, r io.Reader) io.Reader
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

// UploadInputs uploads the job's local inputs to UploadBucket and rewrites their names
// to gridwire-upload URLs, so the stager can fetch them wherever the job runs.
func UploadInputs(ctx context.Context, js jetstream.JetStream, job *events.Job, opt UploadOptions) (int, error) {
	return UploadInputsWith(ctx, BucketPut(js), job, opt)
}

// LocalInputs reports whether the job names inputs on the submitter's disk: stage-in
// sources and stdin given as plain paths when the job has no default_storage_base.
func LocalInputs(job events.Job) bool {
	if job.DefaultStorageBase != "" {
		return false
	}
	for _, f := range job.StageIn {
		if f.From != "" && !hasScheme(f.From) {
			return true
		}
	}
	return job.Stdin != "" && !hasScheme(job.Stdin)
}

// UploadInputsWith uploads the job's local inputs (see LocalInputs) through put and
// rewrites their names to gridwire-upload URLs; a directory is uploaded file by file. It
// returns how many files it uploaded. `gridwire submit` calls it before handing the job in.
func UploadInputsWith(ctx context.Context, put Put, job *events.Job, opt UploadOptions) (int, error) {
	if job.DefaultStorageBase != "" {
		return 0, nil
	}
	n := 0
	upload := func(field, local string) (string, error) {
		if local == "" || hasScheme(local) {
			return local, nil
		}
		name, k, err := uploadPath(ctx, put, localPath(opt.Dir, local), opt.Wrap)
		n += k
		if err != nil {
			return "", fmt.Errorf("%s: uploading %s: %w", field, local, err)
		}
		return UploadURL(name), nil
	}
	for i := range job.StageIn {
		u, err := upload(fmt.Sprintf("stage_in[%d].from", i), job.StageIn[i].From)
		if err != nil {
			return n, err
		}
		if u != job.StageIn[i].From && strings.HasSuffix(u, "/") {
			job.StageIn[i].Directory = true
		}
		job.StageIn[i].From = u
	}
	u, err := upload("stdin", job.Stdin)
	if err != nil {
		return n, err
	}
	job.Stdin = u
	return n, nil
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
