package stager

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"sort"
	"strings"

	"github.com/gridwire/gridwire/events"
	"github.com/nats-io/nats.go/jetstream"
)

// UploadBucket is the JetStream object store bucket that holds files submitters upload
// with their jobs; gridwire-upload://<object> names an object in it.
const UploadBucket = "gridwire-uploads"

// objectName is the object a gridwire-upload URL names: everything after "//".
func objectName(u *url.URL) string { return strings.TrimPrefix(u.Host+u.Path, "/") }

// EnsureUploadBucket creates the upload bucket if it does not exist.
func EnsureUploadBucket(ctx context.Context, js jetstream.JetStream) (jetstream.ObjectStore, error) {
	obs, err := js.ObjectStore(ctx, UploadBucket)
	if err == nil {
		return obs, nil
	}
	if !errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, fmt.Errorf("opening bucket %s: %w", UploadBucket, err)
	}
	obs, err = events.Ensure(ctx, func(ctx context.Context) (jetstream.ObjectStore, error) {
		replicas, err := events.Replicas(ctx, js)
		if err != nil {
			return nil, err
		}
		return js.CreateOrUpdateObjectStore(ctx, jetstream.ObjectStoreConfig{
			Bucket:      UploadBucket,
			Description: "files submitters upload with their jobs",
			Storage:     jetstream.FileStorage,
			Replicas:    replicas,
		})
	})
	if err != nil {
		return nil, fmt.Errorf("creating bucket %s: %w", UploadBucket, err)
	}
	return obs, nil
}

// objectEndpoint serves gridwire-upload URLs. Names are object names.
type objectEndpoint struct{ js jetstream.JetStream }

func (o objectEndpoint) bucket(ctx context.Context) (jetstream.ObjectStore, error) {
	if o.js == nil {
		return nil, fmt.Errorf("%w: no JetStream to read %s from", ErrRemote, UploadBucket)
	}
	obs, err := o.js.ObjectStore(ctx, UploadBucket)
	if err != nil {
		return nil, fmt.Errorf("opening bucket %s: %w", UploadBucket, err)
	}
	return obs, nil
}

func (o objectEndpoint) open(ctx context.Context, name string) (io.ReadCloser, int64, error) {
	obs, err := o.bucket(ctx)
	if err != nil {
		return nil, 0, err
	}
	r, err := obs.Get(ctx, name)
	if err != nil {
		if errors.Is(err, jetstream.ErrObjectNotFound) {
			err = permanent{err}
		}
		return nil, 0, fmt.Errorf("object %s: %w", name, err)
	}
	info, err := r.Info()
	if err != nil {
		r.Close()
		return nil, 0, err
	}
	return r, int64(info.Size), nil
}

func (o objectEndpoint) put(ctx context.Context, name string, r io.Reader, size int64) error {
	obs, err := o.bucket(ctx)
	if err != nil {
		return err
	}
	_, err = obs.Put(ctx, jetstream.ObjectMeta{Name: name}, r)
	return err
}

func (o objectEndpoint) list(ctx context.Context, dir string) ([]string, error) {
	obs, err := o.bucket(ctx)
	if err != nil {
		return nil, err
	}
	infos, err := obs.List(ctx)
	if err != nil && !errors.Is(err, jetstream.ErrNoObjectsFound) {
		return nil, err
	}
	prefix := strings.TrimSuffix(dir, "/") + "/"
	var names []string
	for _, in := range infos {
		if strings.HasPrefix(in.Name, prefix) {
			names = append(names, in.Name[len(prefix):])
		}
	}
	sort.Strings(names)
	return names, nil
}
