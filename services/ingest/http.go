package ingest

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"

	"github.com/gridwire/gridwire/pkg/httpapi"
)

// ServeHTTP handles POST /v1/jobs: the body is a document in any supported language.
// ?format= forces the format; ?file= names it for error messages. A Gridwire-Uploads
// header says the document's local inputs are the submitter's files (see Uploads); while
// any is not uploaded yet the answer is 409 uploads_required, whose details list the
// names to upload (PUT /v1/uploads/...) before submitting again with their objects. The principal comes
// from the request context when an authenticating middleware put one there.
func (s *Service) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		httpapi.WriteError(w, httpapi.Errorf(http.StatusMethodNotAllowed, "method_not_allowed", "use POST"))
		return
	}
	data, ok := s.readBody(w, r)
	if !ok {
		return
	}
	file := r.URL.Query().Get("file")
	if file == "" {
		file = "(request body)"
	}
	var acc Accepted
	uploads, err := ParseUploads(r.Header.Get(HeaderUploads))
	if err == nil {
		acc, err = s.Submit(r.Context(), Submission{File: file, Data: data, ContentType: r.Header.Get("Content-Type"),
			Format: r.URL.Query().Get("format"), Submitter: httpapi.PrincipalFrom(r.Context()), Uploads: uploads,
			IdempotencyKey: r.Header.Get(HeaderIdempotencyKey)})
	}
	status, body := responseFor(acc, err)
	if err == nil && len(acc.Jobs) > 0 {
		w.Header().Set("Location", "/v1/jobs/"+firstOf(acc.Parent, acc.Jobs[0])) // the group, else the job
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// readBody reads a request's document, refusing one over the limit before reading it.
func (s *Service) readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	if r.ContentLength > s.maxBody() { // refused before a byte of it is read
		httpapi.WriteError(w, httpapi.Errorf(http.StatusRequestEntityTooLarge, "document_too_large",
			"the document is %d bytes, over the limit of %d for one document", r.ContentLength, s.maxBody()))
		return nil, false
	}
	data, err := io.ReadAll(io.LimitReader(r.Body, s.maxBody()+1))
	if err != nil {
		httpapi.WriteError(w, httpapi.Errorf(http.StatusBadRequest, "unreadable_body", "%v", err))
		return nil, false
	}
	return data, true
}

// responseFor turns a submission's outcome into a status and JSON body shared by HTTP
// and NATS.
func responseFor(acc Accepted, err error) (int, []byte) {
	if err == nil {
		b, _ := json.Marshal(acc)
		return http.StatusCreated, b
	}
	apiErr := apiError(err)
	b, _ := json.Marshal(map[string]*httpapi.Error{"error": apiErr})
	return apiErr.Status, b
}

// apiError is the API's word for why a submission was refused.
func apiError(err error) *httpapi.Error {
	apiErr := &httpapi.Error{Status: http.StatusInternalServerError, Code: "submit_failed", Detail: err.Error()}
	var pe *ParseError
	var up *UploadsRequiredError
	var already *httpapi.Error
	switch {
	case errors.As(err, &already):
		apiErr = already
	case errors.Is(err, ErrKeyReused):
		apiErr = &httpapi.Error{Status: http.StatusUnprocessableEntity, Code: "idempotency_key_reused", Detail: err.Error()}
	case errors.As(err, &up):
		apiErr = &httpapi.Error{Status: http.StatusConflict, Code: "uploads_required", Detail: up.Error(), Details: up.Names}
	case errors.As(err, &pe):
		apiErr = &httpapi.Error{Status: http.StatusUnprocessableEntity, Code: "invalid_description", Detail: pe.Problems[0].String()}
		for _, p := range pe.Problems {
			apiErr.Details = append(apiErr.Details, p.String())
		}
	case errors.Is(err, ErrInvalid):
		apiErr = &httpapi.Error{Status: http.StatusUnprocessableEntity, Code: "invalid_description", Detail: err.Error()}
	}
	return apiErr
}

func firstOf(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
