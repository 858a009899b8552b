package watcher

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/pkg/httpapi"
	"github.com/nats-io/nats.go/jetstream"
)

// LogStore is what the read API needs of the event store: reading a job's events as
// stored, and appending external events under the same rules as gridwire's own.
type LogStore interface {
	Scan(ctx context.Context, filter string, from uint64, max int) ([]events.Event, bool, error)
	Decide(ctx context.Context, jobID string, decide events.Decision) (events.State, error)
}

// API serves the read side over HTTP: the job table (from the projection), one job (at
// any moment of its life), its history, the live event stream as Server-Sent Events, the
// web page; and the way in for other systems' events. Run mirrors the projection and
// serves external events on NATS; without Run the job table is empty.
type API struct {
	Store LogStore
	JS    jetstream.JetStream
	// Bucket is the projection bucket to mirror (default JobsBucket).
	Bucket string
	// Auth checks the credentials of external events arriving over NATS; nil trusts
	// every NATS client (the bus itself is then the boundary).
	Auth *httpapi.Auth
	// Now is the clock for external events (default time.Now).
	Now func() time.Time
	// Logger is for trouble the API works around (default: discard).
	Logger *slog.Logger

	once    sync.Once
	table   *Table
	metrics metricsOnce
}

// Metrics are the metrics of this API's job table and of the watcher that shares it.
func (a *API) Metrics() *Metrics {
	a.metrics.once.Do(func() { a.metrics.m = NewMetrics(a.Jobs(), a.JS) })
	return a.metrics.m
}

// Routes registers the read routes, POST /v1/events and the web page on mux.
func (a *API) Routes(mux *http.ServeMux) {
	mux.HandleFunc("GET /v1/jobs", a.list)
	mux.HandleFunc("GET /v1/jobs/{id}", a.job)
	mux.HandleFunc("GET /v1/jobs/{id}/events", a.history)
	mux.HandleFunc("GET /v1/events", a.stream)
	mux.HandleFunc("POST /v1/events", a.publish)
	a.webRoutes(mux)
}

// Jobs is the job table this API serves: the mirror of the projection.
func (a *API) Jobs() *Table {
	a.once.Do(func() { a.table = NewTable() })
	return a.table
}

// Run mirrors the projection bucket into Jobs and answers external events on
// events.SubjectExternal until ctx ends.
func (a *API) Run(ctx context.Context) error {
	err := a.mirror(ctx)
	if ctx.Err() != nil && errors.Is(err, context.Canceled) {
		return nil // stopped while starting
	}
	return err
}

func (a *API) mirror(ctx context.Context) error {
	bucket := a.Bucket
	if bucket == "" {
		bucket = JobsBucket
	}
	kv, err := projectionBucket(ctx, a.JS, bucket)
	if err != nil {
		return err
	}
	sub, err := a.JS.Conn().QueueSubscribe(events.SubjectExternal, "gridwire-api", a.publishNATS)
	if err != nil {
		return fmt.Errorf("subscribing to %s: %w", events.SubjectExternal, err)
	}
	defer sub.Unsubscribe()
	// A watch that ends (the server restarting, say) is started again: the table keeps
	// what it has meanwhile, and rows only ever move forward.
	for {
		err := a.watch(ctx, kv)
		if ctx.Err() != nil {
			return nil
		}
		a.logger().Warn("projection mirror interrupted; resuming", "bucket", bucket, "err", err)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Second):
		}
	}
}

// watch copies the bucket's rows and every later change into the table.
func (a *API) watch(ctx context.Context, kv jetstream.KeyValue) error {
	w, err := kv.WatchAll(ctx, jetstream.IgnoreDeletes())
	if err != nil {
		return err
	}
	defer w.Stop()
	t := a.Jobs()
	for {
		select {
		case <-ctx.Done():
			return nil
		case entry, ok := <-w.Updates():
			if !ok {
				return errors.New("watch ended")
			}
			if entry == nil {
				continue
			}
			if _, err := t.setEntry(entry); err != nil {
				a.logger().Warn("projection row left out", "key", entry.Key(), "err", err)
			}
		}
	}
}

func (a *API) logger() *slog.Logger {
	if a.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return a.Logger
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
	// Refused names the first event of the history the fold does not accept (a history
	// written around the store); the state is the fold of the events before it.
	// `gridwire audit verify` says more.
	Refused string `json:"refused,omitempty"`
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

// load reads every event stored under a job's subjects, in stream order. It scans rather
// than walking the chain back from the last event (events.Store.Load), so an event
// written around the store is shown too, where it was stored; a job with none is an
// API error.
func (a *API) load(ctx context.Context, id string) ([]events.Event, error) {
	if !events.ValidRoute(id) { // a job ID is a subject token like a route
		return nil, httpapi.Errorf(http.StatusBadRequest, "bad_job_id", "%q is not a job ID", id)
	}
	var evs []events.Event
	for from := uint64(1); ; {
		batch, more, err := a.Store.Scan(ctx, events.JobFilter(id), from, 1024)
		if err != nil {
			return nil, err
		}
		evs = append(evs, batch...)
		if !more || len(batch) == 0 {
			break
		}
		from = batch[len(batch)-1].Seq + 1
	}
	if len(evs) == 0 {
		return nil, httpapi.Errorf(http.StatusNotFound, "no_such_job", "no job %s", id)
	}
	return evs, nil
}

// foldPrefix folds events in order up to the first one the fold refuses (only a history
// written around the store has one), and names that event.
func foldPrefix(evs []events.Event) (events.State, string) {
	var st events.State
	for _, e := range evs {
		next, err := events.Apply(st, e)
		if err != nil {
			return st, fmt.Sprintf("seq %d (%s %s): %v", e.Seq, e.Name, e.ID, err)
		}
		st = next
	}
	return st, ""
}

// job serves one job's state, folded from its history; ?as_of=TIME folds only the
// events recorded at or before TIME (RFC 3339), the state the job had then.
func (a *API) job(w http.ResponseWriter, r *http.Request) {
	asOf, err := timeParam(r, "as_of")
	if err != nil {
		httpapi.WriteError(w, err)
		return
	}
	evs, err := a.load(r.Context(), r.PathValue("id"))
	if err == nil && !asOf.IsZero() {
		evs, err = eventsAsOf(evs, asOf)
	}
	if err != nil {
		httpapi.WriteError(w, err)
		return
	}
	st, refused := foldPrefix(evs)
	v := ViewOf(st)
	v.Refused = refused
	httpapi.WriteJSON(w, http.StatusOK, v)
}

// eventsAsOf is the history recorded at or before t: its prefix up to the first event
// after t, so a late clock on one service never folds out of order.
func eventsAsOf(evs []events.Event, t time.Time) ([]events.Event, error) {
	n := 0
	for n < len(evs) && !evs[n].Time.After(t) {
		n++
	}
	if n == 0 {
		return nil, httpapi.Errorf(http.StatusNotFound, "not_yet_submitted",
			"as_of: job %s was submitted at %s, after %s", evs[0].JobID, evs[0].Time.Format(time.RFC3339Nano), t.Format(time.RFC3339Nano))
	}
	return evs[:n], nil
}

func timeParam(r *http.Request, name string) (time.Time, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, httpapi.Errorf(http.StatusBadRequest, "bad_"+name, "%s: %q is not an RFC 3339 time", name, v)
	}
	return t, nil
}

// history serves a job's events as stored, whether or not the fold accepts them all.
func (a *API) history(w http.ResponseWriter, r *http.Request) {
	evs, err := a.load(r.Context(), r.PathValue("id"))
	if err != nil {
		httpapi.WriteError(w, err)
		return
	}
	for i := range evs {
		if !json.Valid(evs[i].Data) {
			evs[i].Data = nil // only a forged event has data that is not JSON
		}
	}
	httpapi.WriteJSON(w, http.StatusOK, evs)
}

// list serves the job table from the projection: ?state=A,B&cluster=&submitter=
// &since=TIME&until=TIME (submission time) &after=JOBID&limit=N&order=desc.
func (a *API) list(w http.ResponseWriter, r *http.Request) {
	q, err := queryOf(r)
	if err != nil {
		httpapi.WriteError(w, err)
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, a.Jobs().Select(q))
}

func queryOf(r *http.Request) (Query, error) {
	v := r.URL.Query()
	q := Query{Cluster: v.Get("cluster"), Submitter: v.Get("submitter"), After: v.Get("after"),
		Descending: v.Get("order") == "desc"}
	if o := v.Get("order"); o != "" && o != "asc" && o != "desc" {
		return q, httpapi.Errorf(http.StatusBadRequest, "bad_order", "order: %q is not asc or desc", o)
	}
	for _, s := range strings.Split(v.Get("state"), ",") {
		if s == "" {
			continue
		}
		st := events.Status(strings.ToUpper(s))
		if !knownStatus(st) {
			return q, httpapi.Errorf(http.StatusBadRequest, "bad_state", "state: %q is not a job state", s)
		}
		q.States = append(q.States, st)
	}
	if l := v.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > 1000 {
			return q, httpapi.Errorf(http.StatusBadRequest, "bad_limit", "limit: %q is not a number from 1 to 1000", l)
		}
		q.Limit = n
	}
	var err error
	if q.Since, err = timeParam(r, "since"); err != nil {
		return q, err
	}
	q.Until, err = timeParam(r, "until")
	return q, err
}

func knownStatus(s events.Status) bool {
	switch s {
	case events.StatusSubmitted, events.StatusIncarnated, events.StatusStagingIn, events.StatusQueued,
		events.StatusRunning, events.StatusHeld, events.StatusStagingOut, events.StatusSucceeded,
		events.StatusFailed, events.StatusCancelled:
		return true
	}
	return false
}
