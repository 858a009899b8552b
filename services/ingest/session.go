package ingest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/pkg/httpapi"
)

// SessionStore is what a session update needs of the event store: the folded states of
// the session and its children, and a decision on the session.
type SessionStore interface {
	State(ctx context.Context, jobID string) (events.State, error)
	Decide(ctx context.Context, jobID string, decide events.Decision) (events.State, error)
}

// SessionUpdate is the outcome of a topology update: the children added and removed,
// and how many run on untouched.
type SessionUpdate struct {
	Session string   `json:"session"`
	Added   []string `json:"added"`
	Removed []string `json:"removed"`
	Kept    int      `json:"kept"`
}

// UpdateSession changes the topology of a running DDS session as DDS's topology update
// does (CTopoCore::getDifference): instances are matched by their DDS task ID (the CRC
// of the runtime path and the task's hash string, so a task whose definition changed is
// a new instance); those the new topology adds are submitted as new children, those it
// no longer has leave the session (the watcher stops them), and the rest run on. The
// new children are appended before the session_updated event that names them, so the
// session never lists a child that does not exist.
func (s *Service) UpdateSession(ctx context.Context, session string, sub Submission) (SessionUpdate, error) {
	if s.deps.Sessions == nil {
		return SessionUpdate{}, httpapi.Errorf(http.StatusNotImplemented, "no_sessions", "this ingest has no event store to update sessions with")
	}
	jobs, err := s.Parse(sub)
	if err != nil {
		return SessionUpdate{}, err
	}
	if jobs[0].Kind != events.KindGroup || jobs[0].DDS == nil {
		return SessionUpdate{}, fmt.Errorf("%w: %s: a session is updated with a DDS topology", ErrInvalid, sub.File)
	}
	parent, err := s.deps.Sessions.State(ctx, session)
	if errors.Is(err, events.ErrNotFound) {
		return SessionUpdate{}, httpapi.Errorf(http.StatusNotFound, "no_such_job", "no session %s", session)
	}
	if err != nil {
		return SessionUpdate{}, err
	}
	if err := updatable(parent); err != nil {
		return SessionUpdate{}, err
	}
	if g := httpapi.GrantFrom(ctx); !g.MayActOn(parent.Job.Submitter) {
		return SessionUpdate{}, httpapi.ErrNotOwner(g, "update", session, parent.Job.Submitter)
	}
	tasks, err := s.sessionTasks(ctx, parent)
	if err != nil {
		return SessionUpdate{}, err
	}
	running := make(map[string]bool, len(tasks))
	for _, task := range tasks {
		running[task] = true
	}
	up := SessionUpdate{Session: session, Added: []string{}, Removed: []string{}}
	wanted := make(map[string]bool, len(jobs)-1)
	added := []events.Job{{Kind: events.KindGroup}} // a stand-in parent for Link
	for _, j := range jobs[1:] {
		wanted[j.DDS.TaskID] = true
		if !running[j.DDS.TaskID] {
			added = append(added, j)
		}
	}
	for _, id := range parent.Job.ChildIDs() {
		if task, ok := tasks[id]; ok && !wanted[task] {
			up.Removed = append(up.Removed, id)
		}
	}
	Link(added, sub.Submitter)
	now := s.deps.Now()
	for _, j := range added[1:] {
		j.Parent = session
		e, err := events.New(j.ID, events.Submitted, "", now, j)
		if err != nil {
			return up, err
		}
		e.Principal = sub.Submitter
		if _, err := s.deps.Store.Create(ctx, e); err != nil {
			return up, fmt.Errorf("storing job %s: %w", j.ID, err)
		}
		up.Added = append(up.Added, j.ID)
	}
	up.Kept = parent.Job.NumChildren() - len(up.Removed)
	orig := jobs[0].Original
	_, err = s.deps.Sessions.Decide(ctx, session, func(p events.State) ([]events.Event, error) {
		if err := updatable(p); err != nil {
			return nil, err
		}
		e, err := events.New(session, events.SessionUpdated, "", now, events.SessionUpdateData{
			Added: up.Added, Removed: up.Removed, Original: orig})
		e.Principal = sub.Submitter
		return []events.Event{e}, err
	})
	return up, err
}

// updatable refuses what is not a running DDS session.
func updatable(p events.State) error {
	switch {
	case p.Job == nil || p.Job.Kind != events.KindGroup || p.Job.DDS == nil:
		return httpapi.Errorf(http.StatusConflict, "not_a_session", "job %s is not a DDS session", p.JobID)
	case p.Status.Terminal():
		return httpapi.Errorf(http.StatusConflict, "session_ended", "session %s has ended (%s); a new topology is a new submission", p.JobID, p.Status)
	}
	return nil
}

// sessionTasks reads the DDS task ID of every child of the session, by child.
func (s *Service) sessionTasks(ctx context.Context, parent events.State) (map[string]string, error) {
	ids := parent.Job.ChildIDs()
	out := make(map[string]string, len(ids))
	for _, id := range ids {
		c, err := s.deps.Sessions.State(ctx, id)
		if err != nil {
			return nil, fmt.Errorf("reading task %s of session %s: %w", id, parent.JobID, err)
		}
		if c.Job != nil && c.Job.DDS != nil {
			out[id] = c.Job.DDS.TaskID
		}
	}
	return out, nil
}

// serveSessionUpdate handles PUT /v1/sessions/{id}/topology: the body is the new
// topology.
func (s *Service) serveSessionUpdate(w http.ResponseWriter, r *http.Request) {
	data, ok := s.readBody(w, r)
	if !ok {
		return
	}
	file := r.URL.Query().Get("file")
	if file == "" {
		file = "(request body)"
	}
	up, err := s.UpdateSession(r.Context(), r.PathValue("id"), Submission{File: file, Data: data,
		ContentType: r.Header.Get("Content-Type"), Format: FormatDDS, Submitter: httpapi.PrincipalFrom(r.Context())})
	if err != nil {
		httpapi.WriteError(w, apiError(err))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(up)
}
