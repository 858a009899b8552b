// Package httpapi holds what every gridwire HTTP handler shares: the one typed error that
// crosses the API boundary (status, stable code, detail naming the field and position),
// JSON writing, and authentication (bearer tokens from the config, each a principal with
// permissions, and which permission each kind of request needs). It owns no routes.
package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
)

// Error is the API's error body: {"error": {"code": ..., "detail": ...}}.
type Error struct {
	Status  int      `json:"-"`
	Code    string   `json:"code"`              // stable, e.g. invalid_description
	Detail  string   `json:"detail"`            // what was wrong, with field and position
	Details []string `json:"details,omitempty"` // every problem, when there are several
}

func (e *Error) Error() string { return fmt.Sprintf("%s: %s", e.Code, e.Detail) }

// Errorf builds an Error.
func Errorf(status int, code, format string, args ...any) *Error {
	return &Error{Status: status, Code: code, Detail: fmt.Sprintf(format, args...)}
}

// WriteJSON writes v with the status.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// WriteError writes err as an API error; anything not an *Error is a 500 whose detail
// is kept short.
func WriteError(w http.ResponseWriter, err error) {
	var apiErr *Error
	if !errors.As(err, &apiErr) {
		apiErr = &Error{Status: http.StatusInternalServerError, Code: "internal", Detail: err.Error()}
	}
	WriteJSON(w, apiErr.Status, map[string]*Error{"error": apiErr})
}

// DecodeError reads an API error body from a response, for clients.
func DecodeError(status int, body []byte) error {
	var wrapper struct {
		Error *Error `json:"error"`
	}
	if json.Unmarshal(body, &wrapper) == nil && wrapper.Error != nil {
		wrapper.Error.Status = status
		return wrapper.Error
	}
	return &Error{Status: status, Code: "http_" + fmt.Sprint(status), Detail: string(body)}
}
