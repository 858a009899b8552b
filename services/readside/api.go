package readside

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/pkg/httpapi"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// api serves the read side over HTTP: the job table (from the projection), one job (at
// any moment of its life), its history, the live event stream as Server-Sent Events, the
// web page and the metrics. Its job table is the one the process's projector folds, or,
// when another process keeps the projection, a mirror of the projection bucket.
type api struct {
	store  Store
	js     jetstream.JetStream
	bucket string
	table  *Table
	log    *slog.Logger
	// targets reach the hosts jobs ran on, for their output.
	targets *targets
	// jobs is the JOBS stream's handle, once looked up (see stored).
	mu   sync.Mutex
	jobs jetstream.Stream
}

// routes registers the read routes, the metrics of reg and the web page on mux.
func (a *api) routes(mux *http.ServeMux, reg *prometheus.Registry) {
	mux.HandleFunc("GET /v1/jobs", a.list)
	mux.HandleFunc("GET /v1/jobs/{id}", a.job)
	mux.HandleFunc("GET /v1/jobs/{id}/events", a.history)
	mux.HandleFunc("GET /v1/jobs/{id}/logs", a.output)
	mux.HandleFunc("GET /v1/jobs/{id}/events/{seq}", a.event)
	mux.HandleFunc("GET /v1/whoami", whoami)
	mux.HandleFunc("GET /v1/events", a.stream)
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	webRoutes(mux)
}

// mirror copies the projection bucket into the job table until ctx ends. A bucket that
// cannot be opened or a watch that ends (the server restarting, say) is tried again:
// the table keeps what it has meanwhile, and rows only ever move forward.
func (a *api) mirror(ctx context.Context) error {
	for {
		kv, err := projectionBucket(ctx, a.js, a.bucket)
		if err == nil {
			err = a.watch(ctx, kv)
		}
		if ctx.Err() != nil {
			return nil
		}
		a.log.Warn("projection mirror interrupted; resuming", "bucket", a.bucket, "err", err)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Second):
		}
	}
}

// watch copies the bucket's rows and every later change into the table.
func (a *api) watch(ctx context.Context, kv jetstream.KeyValue) error {
	w, err := kv.WatchAll(ctx, jetstream.IgnoreDeletes())
	if err != nil {
		return err
	}
	defer w.Stop()
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
			if _, err := a.table.setEntry(entry); err != nil {
				a.log.Warn("projection row left out", "key", entry.Key(), "err", err)
			}
		}
	}
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
	// Path is the job's place in its document ("job[2]/subjob[1]", a DDS task path) and
	// Collection the DDS collection instance it belongs to, on one job's view (the job
	// table keeps neither); Children is how many jobs a group has.
	Path       string `json:"path,omitempty"`
	Collection string `json:"collection,omitempty"`
	Children   int    `json:"children,omitempty"`
	// Group counts a parent record's children by state, as of its last move.
	Group *events.GroupSummary `json:"group,omitempty"`
	// Attempt is the job's current attempt when a restart trigger ran it again (from 2),
	// and Restarting says its last attempt crashed and the next is about to begin: its
	// terminal state is not its last.
	Attempt    int  `json:"attempt,omitempty"`
	Restarting bool `json:"restarting,omitempty"`
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
	if st.Attempt() > 1 {
		v.Attempt = st.Attempt()
	}
	v.Restarting = st.Restartable()
	if st.Job != nil {
		v.Name, v.Kind, v.Parent, v.Submitter = st.Job.Name, st.Job.Kind, st.Job.Parent, st.Job.Submitter
		v.Path = st.Job.Original.Path
		if st.Job.DDS != nil {
			v.Collection = st.Job.DDS.CollectionPath
		}
		if st.Job.Kind == events.KindGroup {
			v.Children, v.Group = st.Job.NumChildren(), st.Group
		}
	}
	return v
}

// load reads every event stored under a job's subjects, in stream order
// (events.Store.Stored: through the job's links, checked against the stream's count of
// its subjects, so its cost does not grow with the log), including an event written
// around the store, where it was stored; a job with none is an API error.
func (a *api) load(ctx context.Context, id string) ([]events.Event, error) {
	if !events.ValidJobID(id) {
		return nil, httpapi.Errorf(http.StatusBadRequest, "bad_job_id", "%q is not a job ID", id)
	}
	evs, err := a.store.Stored(ctx, id)
	if err != nil {
		return nil, err
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
func (a *api) job(w http.ResponseWriter, r *http.Request) {
	if err := knownParams(r.URL.Query(), "as_of"); err != nil {
		httpapi.WriteError(w, err)
		return
	}
	asOf, err := timeParam(r, "as_of")
	if err != nil {
		httpapi.WriteError(w, err)
		return
	}
	if asOf.IsZero() {
		if v, ok := a.fromRow(r.Context(), r.PathValue("id")); ok {
			httpapi.WriteJSON(w, http.StatusOK, v)
			return
		}
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

// fromRow is a job's view from its table row, when the row has folded every event the
// log holds under the job's subjects: the fold of the whole history, which is what a
// read through the links gives, without reading one event. The stream counts a job's
// events from its subject index in memory; a job's history is only ever appended to
// (JOBS refuses deletes and purges, keeps events of any age and, when full, refuses new
// ones rather than dropping old ones), so a row that folded as many of the job's events
// as the stream holds folded all of them. A row
// behind the log (an event not folded yet), one that refused an event (the read names
// it), a parent record (its view counts its children, which a row does not keep), a
// child's row from before rows kept the job's place, and any error are read through the
// links.
func (a *api) fromRow(ctx context.Context, id string) (JobView, bool) {
	st, ok := a.table.Row(id)
	if !ok || st.Job == nil || st.Job.Kind == events.KindGroup {
		return JobView{}, false
	}
	if st.Job.Parent != "" && st.Job.Original.Path == "" {
		// A job of a document or session always has a place in it; a row without one
		// was written to the bucket before rows kept it.
		return JobView{}, false
	}
	n, err := a.stored(ctx, id)
	if err != nil || n != uint64(st.Events) {
		return JobView{}, false
	}
	return ViewOf(st), true
}

// stored is how many events the stream holds under a job's subjects, from its subject
// index.
func (a *api) stored(ctx context.Context, id string) (uint64, error) {
	a.mu.Lock()
	s := a.jobs
	a.mu.Unlock()
	if s == nil {
		var err error
		if s, err = a.js.Stream(ctx, events.Stream); err != nil {
			return 0, err
		}
		a.mu.Lock()
		a.jobs = s
		a.mu.Unlock()
	}
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(events.JobFilter(id)))
	if err != nil {
		return 0, err
	}
	var n uint64
	for _, c := range info.State.Subjects {
		n += c
	}
	return n, nil
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
func (a *api) history(w http.ResponseWriter, r *http.Request) {
	err := knownParams(r.URL.Query())
	var evs []events.Event
	if err == nil {
		evs, err = a.load(r.Context(), r.PathValue("id"))
	}
	if err != nil {
		httpapi.WriteError(w, err)
		return
	}
	if wantsBatch(r) {
		writeCloudEvents(w, evs)
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
func (a *api) list(w http.ResponseWriter, r *http.Request) {
	q, err := queryOf(r)
	if err != nil {
		httpapi.WriteError(w, err)
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, a.table.Select(q))
}

func queryOf(r *http.Request) (Query, error) {
	v := r.URL.Query()
	q := Query{Cluster: v.Get("cluster"), Submitter: v.Get("submitter"), After: v.Get("after"),
		Descending: v.Get("order") == "desc", Text: strings.TrimSpace(v.Get("q")), Parent: v.Get("parent")}
	if err := knownParams(v, "state", "cluster", "submitter", "since", "until", "after", "limit", "order", "q", "parent", "root"); err != nil {
		return q, err
	}
	switch root := v.Get("root"); root {
	case "", "false":
	case "true":
		q.Roots = true
	default:
		return q, httpapi.Errorf(http.StatusBadRequest, "bad_root", "root: %q is not true or false", root)
	}
	if o := v.Get("order"); o != "" && o != "asc" && o != "desc" {
		return q, httpapi.Errorf(http.StatusBadRequest, "bad_order", "order: %q is not asc or desc", o)
	}
	for _, s := range strings.Split(v.Get("state"), ",") {
		if s == "" {
			continue
		}
		st := events.Status(strings.ToUpper(s))
		if !st.Known() {
			return q, httpapi.Errorf(http.StatusBadRequest, "bad_state", "state: %q is not a job state (one of %s)", s, statesList())
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

// statesList names every job state, for an error.
func statesList() string {
	var names []string
	for _, s := range events.Statuses() {
		names = append(names, string(s))
	}
	return strings.Join(names, ", ")
}

// knownParams refuses a query parameter the request does not take: a misspelt filter
// must not silently match everything. access_token (how a browser's EventSource sends
// its token) is every request's.
func knownParams(q url.Values, known ...string) error {
	var unknown []string
	for k := range q {
		if k != "access_token" && !slices.Contains(known, k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	slices.Sort(unknown)
	takes := "no parameters"
	if len(known) > 0 {
		takes = strings.Join(known, ", ")
	}
	return httpapi.Errorf(http.StatusBadRequest, "unknown_parameter", "%s: not a parameter of this request (it takes %s)",
		strings.Join(unknown, ", "), takes)
}
