package readside

import (
	"encoding/json"
	"mime"
	"net/http"
	"strconv"
	"strings"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/pkg/httpapi"
)

// The CloudEvents JSON media types (structured mode, one event; and the batch form).
const (
	mediaCloudEvent  = "application/cloudevents+json"
	mediaCloudEvents = "application/cloudevents-batch+json"
)

// accepts reports whether the request's Accept header names the media type.
func accepts(r *http.Request, media string) bool {
	for _, part := range strings.Split(r.Header.Get("Accept"), ",") {
		if mt, _, err := mime.ParseMediaType(strings.TrimSpace(part)); err == nil && mt == media {
			return true
		}
	}
	return false
}

func wantsBatch(r *http.Request) bool { return accepts(r, mediaCloudEvents) }

// cloudEvent is an event as a structured-mode CloudEvent: as gridwire stores it, with
// the stream sequence as the sequence extension. An event that cannot be (only a forged
// one) is shown with the attributes it has.
func cloudEvent(e events.Event) json.RawMessage {
	body, err := e.Encode()
	if err != nil {
		body, _ = json.Marshal(map[string]any{"specversion": "1.0", "id": e.ID, "type": e.Name.Type(),
			"source": e.Source, "subject": e.JobID, "time": e.Time})
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(body, &m) != nil {
		return body
	}
	m["sequence"], _ = json.Marshal(strconv.FormatUint(e.Seq, 10))
	out, _ := json.Marshal(m)
	return out
}

// writeCloudEvents answers with a batch of CloudEvents.
func writeCloudEvents(w http.ResponseWriter, evs []events.Event) {
	batch := make([]json.RawMessage, len(evs))
	for i, e := range evs {
		batch[i] = cloudEvent(e)
	}
	b, _ := json.Marshal(batch)
	w.Header().Set("Content-Type", mediaCloudEvents)
	_, _ = w.Write(b)
}

// event serves one event of a job by its stream sequence: gridwire's JSON, or with
// Accept: application/cloudevents+json the CloudEvent.
func (a *api) event(w http.ResponseWriter, r *http.Request) {
	if err := knownParams(r.URL.Query()); err != nil {
		httpapi.WriteError(w, err)
		return
	}
	seq, err := strconv.ParseUint(r.PathValue("seq"), 10, 64)
	if err != nil {
		httpapi.WriteError(w, httpapi.Errorf(http.StatusBadRequest, "bad_seq", "%q is not a stream sequence", r.PathValue("seq")))
		return
	}
	evs, err := a.load(r.Context(), r.PathValue("id"))
	if err != nil {
		httpapi.WriteError(w, err)
		return
	}
	for _, e := range evs {
		if e.Seq != seq {
			continue
		}
		if accepts(r, mediaCloudEvent) {
			w.Header().Set("Content-Type", mediaCloudEvent)
			_, _ = w.Write(cloudEvent(e))
			return
		}
		httpapi.WriteJSON(w, http.StatusOK, e)
		return
	}
	httpapi.WriteError(w, httpapi.Errorf(http.StatusNotFound, "no_such_event", "job %s has no event at seq %d", r.PathValue("id"), seq))
}

// whoami says who the caller is and what it may do: the web page shows the actions
// the caller is allowed.
func whoami(w http.ResponseWriter, r *http.Request) {
	g := httpapi.GrantFrom(r.Context())
	allow := g.Allow
	if allow == nil {
		allow = []httpapi.Permission{}
	}
	httpapi.WriteJSON(w, http.StatusOK, map[string]any{"principal": g.Principal, "allow": allow})
}

// jsonErrors answers what mux has no route for with the API's JSON error, 404 or 405
// (with Allow), instead of net/http's plain text; everything else goes to mux.
func jsonErrors(mux *http.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h, pattern := mux.Handler(r)
		if pattern != "" {
			mux.ServeHTTP(w, r)
			return
		}
		rec := &statusRecorder{header: http.Header{}}
		h.ServeHTTP(rec, r)
		switch rec.status {
		case http.StatusNotFound:
			httpapi.WriteError(w, httpapi.Errorf(http.StatusNotFound, "no_route", "%s %s: no such route", r.Method, r.URL.Path))
		case http.StatusMethodNotAllowed:
			allow := rec.header.Get("Allow")
			w.Header().Set("Allow", allow)
			httpapi.WriteError(w, httpapi.Errorf(http.StatusMethodNotAllowed, "method_not_allowed",
				"%s %s: the route takes %s", r.Method, r.URL.Path, allow))
		default:
			mux.ServeHTTP(w, r) // a redirect to the clean path, say
		}
	})
}

// statusRecorder keeps the status and headers a handler writes, and drops its body.
type statusRecorder struct {
	header http.Header
	status int
}

func (s *statusRecorder) Header() http.Header { return s.header }
func (s *statusRecorder) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
}
func (s *statusRecorder) Write(b []byte) (int, error) {
	s.WriteHeader(http.StatusOK)
	return len(b), nil
}
