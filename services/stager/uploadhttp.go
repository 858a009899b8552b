package stager

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/gridwire/gridwire/pkg/httpapi"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/oklog/ulid/v2"
)

// UploadAPI receives files submitters upload with their jobs over HTTP and keeps them in
// UploadBucket: PUT /v1/uploads/{name...} with the file as the body, streamed. The name
// is <ULID>/<file>[/<path inside a directory>], as UploadInputsWith makes them.
type UploadAPI struct {
	JS       jetstream.JetStream
	MaxBytes int64 // per file; 0 means unlimited
}

// Routes registers the upload route.
func (u UploadAPI) Routes(mux *http.ServeMux) {
	mux.HandleFunc("PUT /v1/uploads/{name...}", u.put)
}

func (u UploadAPI) put(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if err := validUploadName(name); err != nil {
		httpapi.WriteError(w, httpapi.Errorf(http.StatusBadRequest, "bad_upload_name", "%v", err))
		return
	}
	obs, err := EnsureUploadBucket(r.Context(), u.JS)
	if err != nil {
		httpapi.WriteError(w, err)
		return
	}
	body := http.MaxBytesReader(w, r.Body, u.limit())
	if _, err := obs.Put(r.Context(), jetstream.ObjectMeta{Name: name}, body); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			httpapi.WriteError(w, httpapi.Errorf(http.StatusRequestEntityTooLarge, "upload_too_large",
				"%s is over the limit of %d bytes", name, u.MaxBytes))
			return
		}
		httpapi.WriteError(w, err)
		return
	}
	httpapi.WriteJSON(w, http.StatusCreated, map[string]string{"url": UploadURL(name)})
}

func (u UploadAPI) limit() int64 {
	if u.MaxBytes > 0 {
		return u.MaxBytes
	}
	return 1 << 62
}

// validUploadName accepts <ULID>/<segment>[/<segment>...] with no empty, "." or ".."
// segment and no backslash or control character.
func validUploadName(name string) error {
	segs := strings.Split(name, "/")
	if len(segs) < 2 || len(name) > 1024 {
		return fmt.Errorf("%q is not <ULID>/<file>", name)
	}
	if _, err := ulid.ParseStrict(segs[0]); err != nil {
		return fmt.Errorf("%q does not start with a ULID", name)
	}
	for _, s := range segs[1:] {
		if s == "" || s == "." || s == ".." {
			return fmt.Errorf("%q has an empty, . or .. segment", name)
		}
		for _, c := range s {
			if c < 0x20 || c == 0x7f || c == '\\' {
				return fmt.Errorf("%q has a control character or backslash", name)
			}
		}
	}
	return nil
}
