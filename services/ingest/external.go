package ingest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/pkg/httpapi"
	"github.com/nats-io/nats.go"
)

// External events: other systems publish facts about jobs (a site's own scheduler, a
// workflow engine) so one history holds jobs gridwire did not start. Each is one
// structured-mode CloudEvent, on POST /v1/events or as a request on
// events.SubjectExternal (the token in an Authorization header, a refusal's HTTP status
// in the StatusHeader of the reply). Its type must be a gridwire job event type, its
// data must decode strictly into that type's payload, its source must be one the
// caller's token lists, and the fold must accept it (submitted creates a job). It is
// appended through the store (prevhash, prevseq, the caller's principal), unrouted, so
// it records a fact and never hands work to gridwire's executors. A retry with the
// same id appends nothing.

// StatusHeader carries the HTTP status of a refused external event in the NATS reply.
const StatusHeader = "Gridwire-Status"

// maxExternalBody bounds one external event.
const maxExternalBody = 1 << 20

// EventAccepted is the answer to an accepted external event.
type EventAccepted struct {
	ID     string        `json:"id"`
	Job    string        `json:"job"`
	Seq    uint64        `json:"seq"`
	Status events.Status `json:"status"`
}

// parseExternal validates an external CloudEvent: the schema (a known gridwire type, a
// subject naming the job, data that decodes strictly into that type's payload) and the
// caller's right to publish for its source. The principal is the caller's.
func parseExternal(body []byte, g httpapi.Grant, now time.Time) (events.Event, error) {
	e, err := events.Decode(body)
	if err != nil {
		code := "invalid_event"
		if errors.Is(err, events.ErrUnknownEvent) {
			code = "unknown_type"
		}
		return e, httpapi.Errorf(http.StatusBadRequest, code, "event: %v", err)
	}
	if !e.Name.Known() {
		return e, httpapi.Errorf(http.StatusBadRequest, "unknown_type", "type: %q is not a gridwire job event type", e.Name.Type())
	}
	if strings.HasPrefix(e.Source, events.SourcePrefix) {
		return e, httpapi.Errorf(http.StatusForbidden, "source_not_allowed",
			"source: %q is a gridwire service's; another system's events carry a source of their own", e.Source)
	}
	if !g.MaySource(e.Source) {
		return e, httpapi.Errorf(http.StatusForbidden, "source_not_allowed",
			"source: principal %s may not publish events for source %q", g.Principal, e.Source)
	}
	dec := json.NewDecoder(bytes.NewReader(e.Data))
	dec.DisallowUnknownFields()
	payload := events.NewPayload(e.Name)
	if err := dec.Decode(payload); err != nil {
		return e, httpapi.Errorf(http.StatusBadRequest, "invalid_data", "data: not a %s payload: %v", e.Name, err)
	}
	if job, ok := payload.(*events.Job); ok {
		// The submitter of a job is the authenticated caller, whatever the data says.
		job.Submitter = g.Principal
		if e.Data, err = json.Marshal(job); err != nil {
			return e, err
		}
	}
	if e.Time.IsZero() {
		e.Time = now.UTC()
	}
	// The chain, the route, the principal and the signature are the store's and the
	// gateway's to set: an external event records a fact, never hands work to gridwire's
	// executors, and is signed by ingest, which vouches for who sent it.
	e.Principal, e.PrevHash, e.PrevSeq, e.Route, e.Hash = g.Principal, "", 0, "", ""
	e.Signer, e.Signature = "", ""
	if err := (events.Grant{Role: events.RoleIngest}).May(e, events.State{}); err != nil {
		// directory_deleted: only the cluster's executor records what it removed there.
		return e, httpapi.Errorf(http.StatusForbidden, "not_external", "type: %v", err)
	}
	if err := e.Validate(); err != nil {
		return e, httpapi.Errorf(http.StatusBadRequest, "invalid_event", "event: %v", err)
	}
	return e, nil
}

// appendExternal appends an external event to its job's history under the fold's rules,
// for a caller that may act on the job (its own, a group peer's, any with admin). A
// retry of an event already recorded (same id) appends nothing and answers the same.
func (s *Service) appendExternal(ctx context.Context, e events.Event, g httpapi.Grant) (EventAccepted, error) {
	var seq uint64
	st, err := s.deps.Events.Decide(ctx, e.JobID, func(st events.State) ([]events.Event, error) {
		if st.LastID == e.ID {
			seq = st.LastSeq
			return nil, nil
		}
		if st.Status != events.StatusNone && st.Job != nil && !g.MayActOn(st.Job.Submitter) {
			return nil, httpapi.ErrNotOwner(g, "publish "+string(e.Name)+" for", e.JobID, st.Job.Submitter)
		}
		return []events.Event{e}, nil
	})
	var te *events.TransitionError
	switch {
	case errors.As(err, &te):
		return EventAccepted{}, httpapi.Errorf(http.StatusConflict, "illegal_transition", "type: %v", err)
	case errors.As(err, new(*httpapi.Error)):
		return EventAccepted{}, err
	case errors.Is(err, events.ErrBadEvent):
		return EventAccepted{}, httpapi.Errorf(http.StatusBadRequest, "invalid_data", "data: %v", err)
	case err != nil:
		return EventAccepted{}, err
	}
	if seq == 0 {
		seq = st.LastSeq
	}
	return EventAccepted{ID: e.ID, Job: e.JobID, Seq: seq, Status: st.Status}, nil
}

// publish is POST /v1/events: one structured-mode CloudEvent (application/cloudevents+json
// or application/json).
func (s *Service) publish(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxExternalBody+1))
	if err == nil && len(body) > maxExternalBody {
		err = httpapi.Errorf(http.StatusRequestEntityTooLarge, "too_large", "body: over %d bytes", maxExternalBody)
	}
	var acc EventAccepted
	if err == nil {
		acc, err = s.external(r.Context(), body, httpapi.GrantFrom(r.Context()))
	}
	if err != nil {
		httpapi.WriteError(w, err)
		return
	}
	httpapi.WriteJSON(w, http.StatusCreated, acc)
}

func (s *Service) external(ctx context.Context, body []byte, g httpapi.Grant) (EventAccepted, error) {
	e, err := parseExternal(body, g, s.deps.Now())
	if err != nil {
		return EventAccepted{}, err
	}
	return s.appendExternal(ctx, e, g)
}

// publishNATS answers one external event on events.SubjectExternal with the same JSON as HTTP.
func (s *Service) publishNATS(ctx context.Context, m *nats.Msg) {
	g, err := s.natsGrant(m)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	var out any
	switch {
	case err != nil:
	case len(m.Data) > maxExternalBody:
		err = httpapi.Errorf(http.StatusRequestEntityTooLarge, "too_large", "body: over %d bytes", maxExternalBody)
	default:
		out, err = s.external(ctx, m.Data, g)
	}
	if err != nil {
		var apiErr *httpapi.Error
		if !errors.As(err, &apiErr) {
			apiErr = &httpapi.Error{Status: http.StatusInternalServerError, Code: "internal", Detail: err.Error()}
		}
		out = map[string]*httpapi.Error{"error": apiErr}
	}
	b, _ := json.Marshal(out)
	reply := nats.NewMsg(m.Reply)
	reply.Data = b
	if err != nil {
		reply.Header.Set(StatusHeader, fmt.Sprint(statusOf(err)))
	}
	_ = m.RespondMsg(reply)
}

// natsGrant is what the caller of a NATS request may do: the grant of the bearer token in
// its Authorization header, or the open grant when no tokens are configured.
func (s *Service) natsGrant(m *nats.Msg) (httpapi.Grant, error) {
	if s.deps.Auth.Open() {
		g, _ := s.deps.Auth.Lookup("")
		return g, nil
	}
	token, _ := strings.CutPrefix(m.Header.Get("Authorization"), "Bearer ")
	g, ok := s.deps.Auth.Lookup(token)
	if !ok {
		return g, httpapi.Errorf(http.StatusUnauthorized, "bad_token", "Authorization: the bearer token is not known")
	}
	return g, nil
}

func statusOf(err error) int {
	var apiErr *httpapi.Error
	if errors.As(err, &apiErr) {
		return apiErr.Status
	}
	return http.StatusInternalServerError
}
