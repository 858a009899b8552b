package watcher

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/pkg/httpapi"
	"github.com/nats-io/nats.go/jetstream"
)

// Reader is what the read API needs of the event store.
type Reader interface {
	Load(ctx context.Context, jobID string) (events.History, error)
	Scan(ctx context.Context, filter string, from uint64, max int) ([]events.Event, bool, error)
}

// API serves the read side over HTTP: the job table, one job, its history, and the live
// event stream as Server-Sent Events.
type API struct {
	Store Reader
	JS    jetstream.JetStream
}

// Routes registers the read routes on mux.
func (a *API) Routes(mux *http.ServeMux) {
	mux.HandleFunc("GET /v1/jobs", a.list)
	mux.HandleFunc("GET /v1/jobs/{id}", a.job)
	mux.HandleFunc("GET /v1/jobs/{id}/events", a.history)
	mux.HandleFunc("GET /v1/events", a.stream)
}

// JobView is a job as the API shows it.
type JobView struct {
	ID          string        `json:"id"`
	Name        string        `json:"name,omitempty"`
	Kind        events.Kind   `json:"kind,omitempty"`
	Parent      string        `json:"parent,omitempty"`
	Status      events.Status `json:"status"`
	NativeState string        `json:"native_state,omitempty"`
	Cluster     string        `json:"cluster,omitempty"`
	NativeID    string        `json:"native_id,omitempty"`
	ExitCode    *int          `json:"exit_code,omitempty"`
	Reason      string        `json:"reason,omitempty"`
	Submitter   string        `json:"submitter,omitempty"`
	SubmittedAt time.Time     `json:"submitted_at,omitzero"`
	StartedAt   time.Time     `json:"started_at,omitzero"`
	EndedAt     time.Time     `json:"ended_at,omitzero"`
	UpdatedAt   time.Time     `json:"updated_at,omitzero"`
	Events      int           `json:"events"`
	Seq         uint64        `json:"seq"`
}

// ViewOf summarises a folded state.
func ViewOf(st events.State) JobView {
	v := JobView{ID: st.JobID, Status: st.Status, NativeState: st.NativeState, Cluster: st.Cluster,
		NativeID: st.NativeID, ExitCode: st.ExitCode, Reason: st.Reason, SubmittedAt: st.SubmittedAt,
		StartedAt: st.StartedAt, EndedAt: st.EndedAt, UpdatedAt: st.UpdatedAt, Events: st.Events, Seq: st.LastSeq}
	if st.Job != nil {
		v.Name, v.Kind, v.Parent, v.Submitter = st.Job.Name, st.Job.Kind, st.Job.Parent, st.Job.Submitter
	}
	return v
}

func (a *API) fold(ctx context.Context, id string) (events.State, []events.Event, error) {
	h, err := a.Store.Load(ctx, id)
	if errors.Is(err, events.ErrBadEvent) {
		return events.State{}, nil, httpapi.Errorf(http.StatusBadRequest, "bad_job_id", "%q is not a job ID", id)
	}
	if err != nil {
		return events.State{}, nil, err
	}
	if len(h.Events) == 0 {
		return events.State{}, nil, httpapi.Errorf(http.StatusNotFound, "no_such_job", "no job %s", id)
	}
	st, err := events.Replay(h.Events)
	return st, h.Events, err
}

func (a *API) job(w http.ResponseWriter, r *http.Request) {
	st, _, err := a.fold(r.Context(), r.PathValue("id"))
	if err != nil {
		httpapi.WriteError(w, err)
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, ViewOf(st))
}

func (a *API) history(w http.ResponseWriter, r *http.Request) {
	_, evs, err := a.fold(r.Context(), r.PathValue("id"))
	if err != nil {
		httpapi.WriteError(w, err)
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, evs)
}

// list pages through submitted jobs in stream order: ?after=SEQ&limit=N.
func (a *API) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit, _ := strconv.Atoi(q.Get("limit"))
	if limit <= 0 || limit > 1000 {
		limit = 100
	}
	after, _ := strconv.ParseUint(q.Get("after"), 10, 64)
	subs, more, err := a.Store.Scan(r.Context(), events.TypeFilter(events.Submitted, ""), after+1, limit)
	if err != nil {
		httpapi.WriteError(w, err)
		return
	}
	out := struct {
		Jobs []JobView `json:"jobs"`
		Next uint64    `json:"next,omitempty"`
	}{Jobs: make([]JobView, 0, len(subs))}
	for _, e := range subs {
		st, _, err := a.fold(r.Context(), e.JobID)
		if err != nil {
			httpapi.WriteError(w, err)
			return
		}
		if s := q.Get("state"); s != "" && string(st.Status) != s {
			continue
		}
		out.Jobs = append(out.Jobs, ViewOf(st))
	}
	if more && len(subs) > 0 {
		out.Next = subs[len(subs)-1].Seq
	}
	httpapi.WriteJSON(w, http.StatusOK, out)
}

// stream serves the event log as Server-Sent Events, each with id = stream sequence.
// It resumes after Last-Event-ID (or ?after=SEQ), and ?job=ID narrows it to one job.
func (a *API) stream(w http.ResponseWriter, r *http.Request) {
	flusher, ok := w.(http.Flusher)
	if !ok {
		httpapi.WriteError(w, errors.New("streaming unsupported"))
		return
	}
	filter := events.SubjectAll
	if id := r.URL.Query().Get("job"); id != "" {
		filter = events.JobFilter(id)
	}
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: []string{filter}, DeliverPolicy: jetstream.DeliverNewPolicy}
	last := r.Header.Get("Last-Event-ID")
	if last == "" {
		last = r.URL.Query().Get("after")
	}
	if last != "" {
		seq, err := strconv.ParseUint(last, 10, 64)
		if err != nil {
			httpapi.WriteError(w, httpapi.Errorf(http.StatusBadRequest, "bad_last_event_id", "%q is not a stream sequence", last))
			return
		}
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, seq+1
	} else if r.URL.Query().Get("job") != "" {
		cfg.DeliverPolicy = jetstream.DeliverAllPolicy
	}
	cons, err := a.JS.OrderedConsumer(r.Context(), events.Stream, cfg)
	if err != nil {
		httpapi.WriteError(w, err)
		return
	}
	it, err := cons.Messages()
	if err != nil {
		httpapi.WriteError(w, err)
		return
	}
	defer it.Stop()
	stop := context.AfterFunc(r.Context(), it.Stop)
	defer stop()
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	fmt.Fprint(w, ": gridwire event stream\n\n")
	flusher.Flush()
	for {
		m, err := it.Next()
		if err != nil {
			return
		}
		if err := writeSSE(w, m); err != nil {
			return
		}
		flusher.Flush()
	}
}

func writeSSE(w http.ResponseWriter, m jetstream.Msg) error {
	meta, err := m.Metadata()
	if err != nil {
		return err
	}
	e, err := events.Decode(m.Data())
	if err != nil {
		return nil // not ours to show; the audit finds it
	}
	e.Seq, e.Subject = meta.Sequence.Stream, m.Subject()
	b, _ := json.Marshal(e)
	_, err = fmt.Fprintf(w, "id: %d\nevent: %s\ndata: %s\n\n", e.Seq, e.Name, b)
	return err
}
