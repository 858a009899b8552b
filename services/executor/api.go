package executor

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/pkg/httpapi"
)

// RequestStore is what the control API needs of the event store.
type RequestStore interface {
	Decide(ctx context.Context, jobID string, decide events.Decision) (events.State, error)
}

// ControlAPI serves POST /v1/jobs/{id}/cancel, /hold and /resume: each appends the
// matching request event, routed to the job's cluster when it has one, for the
// cluster's executors to carry out. It answers 202 with the job's state after the
// request; the result (cancelled, held, resumed or action_failed) follows in the log.
type ControlAPI struct {
	Store RequestStore
	Now   func() time.Time
}

// ControlReply is the body of an accepted request.
type ControlReply struct {
	Job     string        `json:"job"`
	Request events.Name   `json:"request"`
	Status  events.Status `json:"status"`
}

// Routes registers the control calls on mux.
func (a ControlAPI) Routes(mux *http.ServeMux) {
	mux.Handle("POST /v1/jobs/{id}/cancel", a.handler(events.CancelRequested))
	mux.Handle("POST /v1/jobs/{id}/hold", a.handler(events.HoldRequested))
	mux.Handle("POST /v1/jobs/{id}/resume", a.handler(events.ResumeRequested))
}

func (a ControlAPI) handler(name events.Name) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("id")
		note, err := readNote(r)
		if err != nil {
			httpapi.WriteError(w, err)
			return
		}
		st, err := a.Request(r.Context(), id, name, note)
		if err != nil {
			httpapi.WriteError(w, err)
			return
		}
		httpapi.WriteJSON(w, http.StatusAccepted, ControlReply{Job: id, Request: name, Status: st.Status})
	})
}

// readNote reads the optional body {"reason": "..."}.
func readNote(r *http.Request) (events.Note, error) {
	var n events.Note
	body, err := io.ReadAll(io.LimitReader(r.Body, 64<<10))
	if err != nil || len(body) == 0 {
		return n, nil
	}
	var in struct {
		Reason string `json:"reason"`
	}
	if err := json.Unmarshal(body, &in); err != nil {
		return n, httpapi.Errorf(http.StatusBadRequest, "invalid_request", "body: %v (want {\"reason\": \"...\"} or nothing)", err)
	}
	n.Reason = in.Reason
	return n, nil
}

// Request appends a request event of the given name for a job, on behalf of the caller
// whose grant ctx carries (httpapi.GrantFrom): it must own the job, share a group with
// its submitter, or have the admin permission. Errors are *httpapi.Error: 404 for an
// unknown job, 403 for someone else's, 409 for one that has ended or for a resume of a
// job that is neither held nor being held.
func (a ControlAPI) Request(ctx context.Context, jobID string, name events.Name, note events.Note) (events.State, error) {
	now := time.Now
	if a.Now != nil {
		now = a.Now
	}
	st, err := a.Store.Decide(ctx, jobID, func(s events.State) ([]events.Event, error) {
		// Someone else's job is refused before anything about its state is said.
		if g, owner := httpapi.GrantFrom(ctx), Owner(s); s.Status != events.StatusNone && !g.MayActOn(owner) {
			return nil, httpapi.ErrNotOwner(g, verb(name), s.JobID, owner)
		}
		if err := refusal(s, name); err != nil {
			return nil, err
		}
		e, err := events.New(s.JobID, name, s.Cluster, now(), note)
		e.Principal = httpapi.PrincipalFrom(ctx) // who asked, recorded on the request
		return []events.Event{e}, err
	})
	var apiErr *httpapi.Error
	switch {
	case errors.As(err, &apiErr):
		return st, err
	case errors.Is(err, events.ErrNotFound):
		return st, httpapi.Errorf(http.StatusNotFound, "no_such_job", "no job %s", jobID)
	case err != nil:
		return st, err
	}
	return st, nil
}

// Owner is the principal a job is acted on for: its submitter.
func Owner(s events.State) string {
	if s.Job == nil {
		return ""
	}
	return s.Job.Submitter
}

func refusal(s events.State, name events.Name) error {
	switch {
	case s.Status == events.StatusNone:
		return events.ErrNotFound
	case s.Status.Terminal():
		return httpapi.Errorf(http.StatusConflict, "job_ended", "job %s: already %s; nothing to %s", s.JobID, s.Status, verb(name))
	case name == events.ResumeRequested && s.Status != events.StatusHeld && !s.HoldRequested:
		return httpapi.Errorf(http.StatusConflict, "not_held", "job %s: %s, neither held nor being held; nothing to resume", s.JobID, s.Status)
	}
	return nil
}

func verb(name events.Name) string {
	switch name {
	case events.CancelRequested:
		return "cancel"
	case events.HoldRequested:
		return "hold"
	}
	return "resume"
}
