package stager

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/pkg/httpapi"
	"github.com/nats-io/nats.go/jetstream"
)

// UploadAPI receives files submitters upload with their jobs over HTTP and keeps them in
// UploadBucket: PUT /v1/uploads/{name...} with the file as the body, streamed. The name
// is <ULID>/<file>[/<path inside a directory>], as Upload makes them.
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
	httpapi.WriteJSON(w, http.StatusCreated, map[string]string{"url": events.UploadURL(name)})
}

func (u UploadAPI) limit() int64 {
	if u.MaxBytes > 0 {
		return u.MaxBytes
	}
	return 1 << 62
}

// validUploadName accepts the name of one uploaded file: an upload object name
// (events.CheckUploadName) that is not a directory's.
func validUploadName(name string) error {
	if strings.HasSuffix(name, "/") {
		return fmt.Errorf("%q names a directory; upload its files one by one", name)
	}
	return events.CheckUploadName(name)
}
