package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"strings"

	"github.com/gridwire/gridwire/pkg/cluster"
	"github.com/gridwire/gridwire/pkg/httpapi"
)

// Exit statuses: each kind of trouble has its own, so a script can tell a failed job
// from a typo, a missing job from a server that is down. exitHelp documents them.
const (
	exitFailed      = 1 // a job did not succeed; a check (audit, replay) found a problem
	exitUsage       = 2 // bad flags or arguments
	exitInvalid     = 3 // input refused: a description, a file missing or too large
	exitNotFound    = 4 // no such job (or no data where an offline verb looked)
	exitRefused     = 5 // the server refused: no permission, or the job cannot do that now
	exitUnreachable = 6 // the server could not be reached
	exitInternal    = 7 // the server failed, or anything else went wrong
)

const exitHelp = `
Exit status:
  0  success
  1  a job did not succeed; audit or replay found a problem
  2  bad flags or arguments
  3  input refused (a description or the config file is invalid, a file is missing or too large)
  4  no such job, or its output is gone (removed by retention); no data where an offline verb looked
  5  refused by the server (permission; the job has ended or is not held)
  6  the server could not be reached
  7  the server failed, or another error
`

// exitCode is returned by verbs whose result is an exit status rather than an error
// (submit --wait with a job that did not succeed): what went wrong is already printed.
type exitCode int

func (e exitCode) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

// cliError is a problem found on this side of the API: it has a stable code like the
// server's errors, and an exit status.
type cliError struct {
	code   string
	exit   int
	detail string
	err    error
}

func (e *cliError) Error() string { return e.detail }
func (e *cliError) Unwrap() error { return e.err }

func usageErrorf(format string, args ...any) error {
	return &cliError{code: "usage", exit: exitUsage, detail: fmt.Sprintf(format, args...)}
}

func invalidErrorf(format string, args ...any) error {
	err := fmt.Errorf(format, args...)
	return &cliError{code: "invalid_input", exit: exitInvalid, detail: err.Error(), err: errors.Unwrap(err)}
}

func notFoundErrorf(format string, args ...any) error {
	return &cliError{code: "no_such_job", exit: exitNotFound, detail: fmt.Sprintf(format, args...)}
}

// unreachableError says the server could not be reached after every attempt.
type unreachableError struct {
	server   string
	attempts int
	err      error
}

func (e *unreachableError) Error() string {
	return fmt.Sprintf("cannot reach gridwire at %s after %d attempts: %v (is `gridwire serve` running? --server or $GRIDWIRE_SERVER says where)",
		e.server, e.attempts, e.err)
}
func (e *unreachableError) Unwrap() error { return e.err }

// classify returns an error's stable code and exit status.
func classify(err error) (string, int) {
	var ec exitCode
	var ce *cliError
	var ue *unreachableError
	var api *httpapi.Error
	var pe *fs.PathError
	switch {
	case errors.As(err, &ec):
		return "", int(ec)
	case errors.As(err, &ce):
		return ce.code, ce.exit
	case errors.As(err, &ue):
		return "unreachable", exitUnreachable
	case errors.As(err, &api):
		return api.Code, exitOfStatus(api.Status)
	case errors.Is(err, cluster.ErrInvalid):
		return "invalid_config", exitInvalid
	case errors.As(err, &pe):
		return "no_such_file", exitInvalid
	}
	return "internal", exitInternal
}

func exitOfStatus(status int) int {
	switch {
	case status == http.StatusNotFound, status == http.StatusGone:
		return exitNotFound
	case status == http.StatusBadRequest:
		return exitUsage
	case status == http.StatusUnprocessableEntity, status == http.StatusRequestEntityTooLarge,
		status == http.StatusUnsupportedMediaType:
		return exitInvalid
	case status == http.StatusUnauthorized, status == http.StatusForbidden, status == http.StatusConflict:
		return exitRefused
	}
	return exitInternal
}

// report prints err on w (as JSON when asJSON) and returns the process's exit status.
// An exitCode prints nothing: its verb has said what happened.
func report(w io.Writer, err error, asJSON bool) int {
	if err == nil {
		return 0
	}
	code, exit := classify(err)
	var ec exitCode
	if errors.As(err, &ec) {
		return exit
	}
	var details []string
	var api *httpapi.Error
	if errors.As(err, &api) && len(api.Details) > 1 {
		details = api.Details
	}
	if asJSON {
		body := map[string]any{"code": code, "detail": err.Error(), "exit": exit}
		if len(details) > 0 {
			body["details"] = details
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"error": body})
		return exit
	}
	fmt.Fprintln(w, "gridwire:", err)
	if len(details) > 0 {
		fmt.Fprintf(w, "%d problems:\n  %s\n", len(details), strings.Join(details, "\n  "))
	}
	return exit
}
