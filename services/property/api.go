package property

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/pkg/httpapi"
)

// Routes of the task-side API. Every request carries the task's credential as a bearer
// token; the task is the one the credential was issued to, and it reaches only the
// properties its own declaration names.
const (
	// RouteList lists the values the task may read; with ?watch=1 it is an SSE stream of
	// their changes (key=K, repeated, narrows it to those keys).
	RouteList = "/v1/tasks/self/properties"
	// RouteKey reads (GET) or sets (PUT, the body is the value) one property.
	RouteKey = RouteList + "/{key}"
)

// Routes registers the task-side API on mux.
func (s *Service) Routes(mux *http.ServeMux) {
	mux.HandleFunc("GET "+RouteList, s.serveList)
	mux.HandleFunc("GET "+RouteKey, s.serveGet)
	mux.HandleFunc("PUT "+RouteKey, s.servePut)
}

// Value is a property as the API shows it.
type Value struct {
	Key        string    `json:"key"`
	Value      string    `json:"value"`
	Scope      string    `json:"scope"`
	Collection string    `json:"collection,omitempty"`
	Writer     string    `json:"writer"`                // the writer's job ID
	WriterPath string    `json:"writer_path,omitempty"` // its DDS task path
	WriterID   string    `json:"writer_task_id,omitempty"`
	Seq        uint64    `json:"seq"`
	Time       time.Time `json:"time"`
}

func valueOf(en Entry) Value {
	return Value{Key: en.Key, Value: en.PropertySetData.Value, Scope: en.Scope, Collection: en.Collection,
		Writer: en.Task, WriterPath: en.TaskPath, WriterID: en.DDSTaskID, Seq: en.Seq, Time: en.Time}
}

// Set is the answer to a PUT.
type Set struct {
	Session string `json:"session"`
	Key     string `json:"key"`
	Seq     uint64 `json:"seq"` // the property_set's stream sequence
}

// task authenticates a request: the running task its credential names.
func (s *Service) task(r *http.Request) (*events.Job, error) {
	token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || token == "" {
		return nil, httpapi.Errorf(http.StatusUnauthorized, "unauthenticated", "Authorization: the task's credential (GRIDWIRE_PROPERTY_TOKEN) is required as a bearer token")
	}
	id, err := s.deps.Key.Verify(token)
	if err != nil {
		return nil, httpapi.Errorf(http.StatusUnauthorized, "bad_task_credential", "Authorization: not a task credential of this gateway")
	}
	st, err := s.deps.Store.State(r.Context(), id)
	switch {
	case err != nil && !errors.Is(err, events.ErrNotFound):
		return nil, fmt.Errorf("reading task %s: %w", id, err)
	case st.Job == nil:
		return nil, httpapi.Errorf(http.StatusUnauthorized, "bad_task_credential", "Authorization: task %s is not in the log", id)
	case !st.Job.HasProperties():
		return nil, httpapi.Errorf(http.StatusForbidden, events.RefusedNotATask, "task %s is not a task of a DDS session with properties", id)
	case st.Status.Terminal():
		return nil, httpapi.Errorf(http.StatusForbidden, "task_ended", "task %s has ended (%s): its credential is spent", id, st.Status)
	}
	return st.Job, nil
}

// refusal turns a refused property into the API's error: a name or value no property
// may have is a bad request, anything the task's declaration does not allow forbidden.
func refusal(err error) error {
	var pe *events.PropertyError
	if !errors.As(err, &pe) {
		return err
	}
	status := http.StatusForbidden
	if pe.Code == events.RefusedBadName || pe.Code == events.RefusedValue {
		status = http.StatusBadRequest
	}
	return httpapi.Errorf(status, pe.Code, "%s", pe.Error())
}

func (s *Service) servePut(w http.ResponseWriter, r *http.Request) {
	task, err := s.task(r)
	if err != nil {
		httpapi.WriteError(w, err)
		return
	}
	// Four bytes a character at most: a longer body is refused by the count below.
	body, err := io.ReadAll(io.LimitReader(r.Body, 4*events.MaxPropertyValue+1))
	if err != nil {
		httpapi.WriteError(w, httpapi.Errorf(http.StatusBadRequest, "bad_body", "reading the value: %v", err))
		return
	}
	set, err := s.Put(r.Context(), task, r.PathValue("key"), string(body))
	if err != nil {
		httpapi.WriteError(w, err)
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, set)
}

// Put sets a property for task: refused unless its declaration allows it, appended to
// its session's history, and answered once this process's view holds it (so the writer
// reads its own write), or after PutWait.
func (s *Service) Put(ctx context.Context, task *events.Job, key, value string) (Set, error) {
	d, err := events.PropertyWrite(task, key, value)
	if err != nil {
		return Set{}, refusal(err)
	}
	st, err := s.deps.Store.Decide(ctx, task.Parent, func(st events.State) ([]events.Event, error) {
		if st.Status.Terminal() {
			return nil, httpapi.Errorf(http.StatusConflict, "session_ended", "session %s has ended (%s)", task.Parent, st.Status)
		}
		e, err := events.New(task.Parent, events.PropertySet, "", s.deps.Now(), d)
		e.Principal = "task " + task.ID
		return []events.Event{e}, err
	})
	if err != nil {
		return Set{}, err
	}
	wctx, cancel := context.WithTimeout(ctx, s.cfg.PutWait)
	defer cancel()
	s.hub.wait(wctx, task.Parent, EntryKey(task.Parent, d), st.LastSeq)
	return Set{Session: task.Parent, Key: key, Seq: st.LastSeq}, nil
}

func (s *Service) serveGet(w http.ResponseWriter, r *http.Request) {
	task, err := s.task(r)
	if err != nil {
		httpapi.WriteError(w, err)
		return
	}
	key := r.PathValue("key")
	p, err := events.PropertyRead(task, key)
	if err != nil {
		httpapi.WriteError(w, refusal(err))
		return
	}
	if err := s.ready(r.Context()); err != nil {
		httpapi.WriteError(w, err)
		return
	}
	at := EntryKey(task.Parent, events.PropertySetData{Key: key, Scope: p.Scope, Collection: task.DDS.CollectionPath})
	for _, en := range s.hub.snapshot(task.Parent) {
		if EntryKey(en.Session, en.PropertySetData) == at {
			httpapi.WriteJSON(w, http.StatusOK, valueOf(en))
			return
		}
	}
	httpapi.WriteError(w, httpapi.Errorf(http.StatusNotFound, "not_set", "property %q: no task has set it yet", key))
}

// ready waits for this process's first look at the live view.
func (s *Service) ready(ctx context.Context) error {
	select {
	case <-s.hub.ready:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(10 * time.Second):
		return httpapi.Errorf(http.StatusServiceUnavailable, "not_ready", "the property view is not readable yet")
	}
}

func (s *Service) serveList(w http.ResponseWriter, r *http.Request) {
	task, err := s.task(r)
	if err != nil {
		httpapi.WriteError(w, err)
		return
	}
	keys := r.URL.Query()["key"]
	for _, k := range keys {
		if _, err := events.PropertyRead(task, k); err != nil {
			httpapi.WriteError(w, refusal(err))
			return
		}
	}
	if err := s.ready(r.Context()); err != nil {
		httpapi.WriteError(w, err)
		return
	}
	f := filter{task: task, keys: keys}
	if r.URL.Query().Get("watch") != "" {
		s.watch(w, r, f)
		return
	}
	out := []Value{}
	for _, en := range s.hub.snapshot(task.Parent) {
		if f.shows(en) {
			out = append(out, valueOf(en))
		}
	}
	httpapi.WriteJSON(w, http.StatusOK, out)
}

// filter is what one task sees of its session's properties: those it reads, in its
// scope, set by another task (DDS never notifies a writer of its own write), among keys
// when any are named.
type filter struct {
	task *events.Job
	keys []string
}

func (f filter) shows(en Entry) bool {
	return en.Task != f.task.ID && en.Reaches(f.task) && (len(f.keys) == 0 || slices.Contains(f.keys, en.Key))
}

// watch streams the values the task sees as server-sent events: first those already
// set after Last-Event-ID (a sequence; all of them without one), then each change. The
// event's id is the property_set's stream sequence, so a client that reconnects with it
// misses nothing and sees nothing twice.
func (s *Service) watch(w http.ResponseWriter, r *http.Request, f filter) {
	flusher, ok := w.(http.Flusher)
	if !ok {
		httpapi.WriteError(w, errors.New("property: the connection cannot stream"))
		return
	}
	last, _ := strconv.ParseUint(r.Header.Get("Last-Event-ID"), 10, 64)
	sub, now := s.hub.subscribe(f.task.Parent)
	defer s.hub.unsubscribe(f.task.Parent, sub)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	_, _ = io.WriteString(w, ": watching\n\n")
	sent := map[string]uint64{}
	send := func(en Entry) error {
		k := EntryKey(en.Session, en.PropertySetData)
		if en.Seq <= last || en.Seq <= sent[k] || !f.shows(en) {
			return nil
		}
		sent[k] = en.Seq
		return writeEvent(w, en)
	}
	for _, en := range now {
		if err := send(en); err != nil {
			return
		}
	}
	flusher.Flush()
	keep := time.NewTicker(15 * time.Second)
	defer keep.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case en, ok := <-sub.ch:
			if !ok {
				return // cut off for falling behind: the client resumes from its last id
			}
			if err := send(en); err != nil {
				return
			}
		case <-keep.C:
			if _, err := io.WriteString(w, ": keepalive\n\n"); err != nil {
				return
			}
		}
		flusher.Flush()
	}
}

func writeEvent(w io.Writer, en Entry) error {
	b, err := en.sse()
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}
