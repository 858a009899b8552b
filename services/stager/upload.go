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

// UploadInputs uploads the job's local inputs to UploadBucket and rewrites their names
// to gridwire-upload URLs, so the stager can fetch them wherever the job runs. Local
// inputs are stage-in sources and stdin given as plain paths when the job has no
// default_storage_base; a directory is uploaded file by file. It returns how many files
// it uploaded. `gridwire submit` calls it before handing the job in.
func UploadInputs(ctx context.Context, js jetstream.JetStream, job *events.Job, opt UploadOptions) (int, error) {
	if job.DefaultStorageBase != "" {
		return 0, nil
	}
	var obs jetstream.ObjectStore
	n := 0
	upload := func(field, local string) (string, error) {
		if local == "" || hasScheme(local) {
			return local, nil
		}
		if obs == nil {
			var err error
			if obs, err = EnsureUploadBucket(ctx, js); err != nil {
				return "", err
			}
		}
		name, k, err := uploadPath(ctx, obs, localPath(opt.Dir, local), opt.Wrap)
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
func uploadPath(ctx context.Context, obs jetstream.ObjectStore, p string, wrap func(string, int64, io.Reader) io.Reader) (string, int, error) {
	fi, err := os.Stat(p)
	if err != nil {
		return "", 0, err
	}
	prefix := ulid.Make().String() + "/" + filepath.Base(p)
	if !fi.IsDir() {
		return prefix, 1, uploadFile(ctx, obs, p, prefix, wrap)
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
		return uploadFile(ctx, obs, f, path.Join(prefix, filepath.ToSlash(rel)), wrap)
	})
	return prefix + "/", n, err
}

func uploadFile(ctx context.Context, obs jetstream.ObjectStore, p, name string, wrap func(string, int64, io.Reader) io.Reader) error {
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
	_, err = obs.Put(ctx, jetstream.ObjectMeta{Name: name}, r)
	return err
}
