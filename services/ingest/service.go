// Package ingest is every way in: it reads job descriptions in the languages of the
// specs, turns them into canonical jobs, and appends one submitted event per job; and it
// takes other systems' events about jobs (external.go), checked like gridwire's own. A
// rejected document or event appends nothing. It does not choose where jobs run or run
// them.
package ingest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/pkg/httpapi"
	"github.com/nats-io/nats.go"
)

// Headers of a submission over NATS (on events.SubjectSubmit): the body is the
// document, these carry its name and format; the caller's bearer token goes in an
// Authorization header, as on HTTP, and its principal is the submitter.
const (
	HeaderFile   = "Gridwire-File"
	HeaderFormat = "Gridwire-Format"
)

// Config is ingest's plain configuration. The zero value is valid.
type Config struct {
	// MaxBytes caps one document; 0 means MaxDocumentBytes.
	MaxBytes int64
	// Queue is the queue group of the NATS request endpoint.
	Queue string
}

// Validate reports configuration errors.
func (c Config) Validate() error {
	if c.MaxBytes < 0 {
		return fmt.Errorf("ingest: max bytes %d < 0", c.MaxBytes)
	}
	return nil
}

// Store is what ingest needs of the event store.
type Store interface {
	Create(ctx context.Context, e events.Event) (uint64, error)
}

// EventStore is what other systems' events need of the event store: a decision on a
// job's folded history, appended under the fold's rules.
type EventStore interface {
	Decide(ctx context.Context, jobID string, decide events.Decision) (events.State, error)
}

// Deps are ingest's live collaborators.
type Deps struct {
	Conn  *nats.Conn // for the request endpoints; nil disables them
	Store Store
	// Events takes other systems' events (POST /v1/events and events.SubjectExternal);
	// nil takes none.
	Events EventStore
	// Auth checks the bearer tokens of external events arriving over NATS; nil trusts
	// every NATS client (the bus itself is then the boundary). Over HTTP, the server's
	// middleware authenticates.
	Auth   *httpapi.Auth
	Logger *slog.Logger
	Now    func() time.Time
	// Check, when set, vets every parsed job before anything is appended (the stager's
	// scheme allow-list, for instance). An error rejects the whole document. It keeps
	// nothing of the job: a streamed topology's instances share their parts.
	Check func(events.Job) error
	// Keys records idempotency keys; nil refuses submissions that carry one.
	Keys Keys
	// Sessions updates running DDS sessions (PUT /v1/sessions/{id}/topology); nil
	// refuses updates.
	Sessions SessionStore
}

// Submission is one document handed in.
type Submission struct {
	File        string
	Data        []byte
	ContentType string
	Format      string
	Submitter   string
	// Uploads, when not nil, says the description's local inputs are the submitter's
	// files, uploaded as these objects (see Uploads).
	Uploads Uploads
	// IdempotencyKey, when set, makes the submission safe to repeat: the first one with a
	// key (per submitter) records the job IDs it creates, and every repeat returns them
	// and appends only what an interrupted earlier attempt did not.
	IdempotencyKey string
}

// Accepted lists the IDs a submission created: the parent record first when there is one.
type Accepted struct {
	Jobs   []string `json:"jobs"`
	Parent string   `json:"parent,omitempty"`
}

// Service accepts submissions. It is safe for concurrent use.
type Service struct {
	cfg    Config
	deps   Deps
	fields *fieldCache // the job types' fields, for validateJob
	// creates stores concurrent single-job submissions' events together (coalesce.go).
	creates *createQueue
}

// New returns a Service.
func New(cfg Config, deps Deps) (*Service, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if deps.Store == nil {
		return nil, errors.New("ingest: no store")
	}
	if deps.Now == nil {
		deps.Now = time.Now
	}
	if deps.Logger == nil {
		deps.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Queue == "" {
		cfg.Queue = "ingest"
	}
	return &Service{cfg: cfg, deps: deps, fields: &fieldCache{}, creates: &createQueue{}}, nil
}

// Run serves the NATS request endpoints (submissions, and external events when
// deps.Events is set) until ctx ends.
func Run(ctx context.Context, cfg Config, deps Deps) error {
	s, err := New(cfg, deps)
	if err != nil {
		return err
	}
	if deps.Conn == nil {
		<-ctx.Done()
		return nil
	}
	endpoints := map[string]func(context.Context, *nats.Msg){events.SubjectSubmit: s.serveNATS}
	if deps.Events != nil {
		endpoints[events.SubjectExternal] = s.publishNATS
	}
	var subs []*nats.Subscription
	var errs []error
	for subject, serve := range endpoints {
		sub, err := deps.Conn.QueueSubscribe(subject, s.cfg.Queue, func(m *nats.Msg) { serve(ctx, m) })
		if err != nil {
			errs = append(errs, fmt.Errorf("ingest: subscribing %s: %w", subject, err))
			break
		}
		subs = append(subs, sub)
	}
	if len(errs) == 0 {
		<-ctx.Done()
	}
	for _, sub := range subs {
		if err := sub.Drain(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Routes registers ingest's HTTP way in on mux: POST /v1/jobs (ServeHTTP), POST
// /v1/jobs/bulk (ServeBulk), PUT /v1/sessions/{id}/topology (UpdateSession), and POST
// /v1/events when deps.Events is set.
func (s *Service) Routes(mux *http.ServeMux) {
	mux.Handle("POST /v1/jobs", s)
	mux.HandleFunc("POST /v1/jobs/bulk", s.ServeBulk)
	mux.HandleFunc("PUT /v1/sessions/{id}/topology", s.serveSessionUpdate)
	if s.deps.Events != nil {
		mux.HandleFunc("POST /v1/events", s.publish)
	}
}

// Parse reads a submission without appending anything.
func (s *Service) Parse(sub Submission) ([]events.Job, error) {
	limit := s.cfg.MaxBytes
	if limit == 0 {
		limit = MaxDocumentBytes
	}
	if int64(len(sub.Data)) > limit {
		return nil, &ParseError{[]Problem{{File: sub.File, Line: 1, Col: 1, Field: "(document)",
			What: fmt.Sprintf("%d bytes is over the limit of %d", len(sub.Data), limit)}}}
	}
	jobs, err := Parse(sub.File, sub.Data, ParseOptions{Format: sub.Format, ContentType: sub.ContentType})
	if err != nil {
		return nil, err
	}
	if len(jobs) == 0 {
		return nil, &ParseError{[]Problem{{File: sub.File, Line: 1, Col: 1, Field: "(document)", What: "no job in the document"}}}
	}
	for i := range jobs {
		if err := validateJob(&jobs[i], s.fields); err != nil {
			return nil, fmt.Errorf("%w: %s: job %d: %v", ErrInvalid, sub.File, i, err)
		}
	}
	if sub.Uploads != nil {
		if err := resolveUploads(sub.File, jobs, sub.Uploads); err != nil {
			return nil, err
		}
	}
	if s.deps.Check != nil {
		for i, j := range jobs {
			if err := s.deps.Check(j); err != nil {
				return nil, fmt.Errorf("%w: %s: job %d: %v", ErrInvalid, sub.File, i, err)
			}
		}
	}
	return jobs, nil
}

// Submit parses a document, gives its jobs IDs and appends one submitted event per job,
// each acknowledged by the stream before Submit returns. A document that does not parse
// appends nothing.
func (s *Service) Submit(ctx context.Context, sub Submission) (Accepted, error) {
	if t := s.streamed(sub); t != nil {
		return s.submitStream(ctx, sub, t)
	}
	p, err := s.prepare(ctx, sub)
	if err != nil {
		return Accepted{}, err
	}
	acc := p.accepted()
	if bs, ok := s.deps.Store.(BulkStore); ok && len(p.events) == 1 {
		// One job: stored with the events of the submissions arriving with it.
		if err := s.creates.create(ctx, bs, p.events[0]); p.failed(err) {
			acc.Jobs = acc.Jobs[:0]
			return acc, fmt.Errorf("storing job %s: %w", p.events[0].JobID, err)
		}
		return acc, nil
	}
	for i, e := range p.events {
		if _, err := s.deps.Store.Create(ctx, e); p.failed(err) {
			acc.Jobs = acc.Jobs[:i]
			return acc, fmt.Errorf("storing job %s: %w", e.JobID, err)
		}
	}
	return acc, nil
}

// prepared is a parsed submission with its submitted events, not yet stored.
type prepared struct {
	events []events.Event
	parent string
	keyed  bool
}

// prepare parses a submission, gives its jobs their IDs (the key's, for a keyed
// submission seen before) and builds their submitted events.
func (s *Service) prepare(ctx context.Context, sub Submission) (prepared, error) {
	jobs, err := s.Parse(sub)
	if err != nil {
		return prepared{}, err
	}
	Link(jobs, sub.Submitter)
	p := prepared{keyed: sub.IdempotencyKey != ""}
	if p.keyed {
		if err := s.reserve(ctx, sub, jobs); err != nil {
			return prepared{}, err
		}
	}
	if jobs[0].Kind == events.KindGroup {
		p.parent = jobs[0].ID
	}
	now := s.deps.Now()
	p.events = make([]events.Event, 0, len(jobs))
	for i := range jobs {
		// In place, by pointer: encoded the same (no pointer-receiver marshaler in a
		// Job), without copying 1 KB of it into an interface for every job.
		j := &jobs[i]
		anchorDeadline(j, now)
		route := ""
		if j.Kind == events.KindGroup {
			route = events.RouteGroup
		}
		e, err := events.New(j.ID, events.Submitted, route, now, j)
		if err != nil {
			return prepared{}, err
		}
		e.Principal = sub.Submitter
		p.events = append(p.events, e)
	}
	return p, nil
}

// failed reports whether storing one of the submission's events failed: a keyed job's
// ID is its key's alone, so if it already has a history, an earlier attempt of this
// same submission wrote it.
func (p prepared) failed(err error) bool {
	return err != nil && !(p.keyed && errors.Is(err, events.ErrConflict))
}

// accepted is the answer for the whole submission stored.
func (p prepared) accepted() Accepted {
	acc := Accepted{Jobs: make([]string, len(p.events)), Parent: p.parent}
	for i, e := range p.events {
		acc.Jobs[i] = e.JobID
	}
	return acc
}

// Link gives every job an ID and ties children to their parent record: a KindGroup job
// first in the list is the parent of all that follow. A group's children get consecutive
// IDs in the description's order, so whatever lists them by ID (status's tree, the API's
// ?parent=, list) lists them as the document wrote them; a parent of many names them as
// that range.
func Link(jobs []events.Job, submitter string) {
	ids := make([]string, len(jobs))
	if n := len(jobs) - 1; n > 0 && jobs[0].Kind == events.KindGroup {
		ids[0] = events.NewID()
		r := events.NewIDRange(n)
		for i := range n {
			ids[i+1] = r.At(i)
		}
	} else {
		for i := range ids {
			ids[i] = events.NewID()
		}
	}
	linkIDs(jobs, submitter, ids)
}

// linkIDs is Link with the IDs given, in order.
func linkIDs(jobs []events.Job, submitter string, ids []string) {
	for i := range jobs {
		jobs[i].ID = ids[i]
		jobs[i].Submitter = submitter
	}
	if len(jobs) == 0 || jobs[0].Kind != events.KindGroup {
		return
	}
	parent := &jobs[0]
	for i := 1; i < len(jobs); i++ {
		jobs[i].Parent = parent.ID
	}
	if len(ids)-1 > events.ChildListMax {
		if r, ok := consecutive(ids[1:]); ok {
			parent.ChildRange = &r
			return
		}
	}
	parent.Children = ids[1:len(jobs):len(jobs)]
}

// consecutive reports whether ids are one range of consecutive job IDs.
func consecutive(ids []string) (events.IDRange, bool) {
	if len(ids) == 0 {
		return events.IDRange{}, false
	}
	r := events.IDRange{First: ids[0], Count: len(ids)}
	for i, id := range ids {
		if r.At(i) != id {
			return events.IDRange{}, false
		}
	}
	return r, true
}

// serveNATS answers one submission on events.SubjectSubmit. The submitter is the
// principal of the bearer token in its Authorization header (anonymous when no tokens
// are configured, as on HTTP), which must allow submit: nothing the request says about
// who sent it is believed.
func (s *Service) serveNATS(ctx context.Context, m *nats.Msg) {
	sub := Submission{File: m.Header.Get(HeaderFile), Data: m.Data, ContentType: m.Header.Get("Content-Type"),
		Format: m.Header.Get(HeaderFormat), IdempotencyKey: m.Header.Get(HeaderIdempotencyKey)}
	if sub.File == "" {
		sub.File = "(request)"
	}
	var acc Accepted
	g, err := s.natsGrant(m)
	if err == nil && !g.May(httpapi.PermSubmit) {
		err = httpapi.Errorf(http.StatusForbidden, "forbidden", "principal %s may not submit", g.Principal)
	}
	if err == nil {
		sub.Submitter = g.Principal
		sub.Uploads, err = ParseUploads(m.Header.Get(HeaderUploads))
	}
	if err == nil {
		acc, err = s.Submit(ctx, sub)
	}
	status, body := responseFor(acc, err)
	reply := nats.NewMsg(m.Reply)
	reply.Header.Set("Status-Code", fmt.Sprint(status))
	reply.Data = body
	_ = m.RespondMsg(reply)
}

// maxBody guards HTTP reads before parsing.
func (s *Service) maxBody() int64 {
	if s.cfg.MaxBytes > 0 {
		return s.cfg.MaxBytes
	}
	return MaxDocumentBytes
}

var _ http.Handler = (*Service)(nil)

// anchorDeadline turns a start-before given as a period (JRDL's jobStartBefore, which may
// count months) into the time it names, counted from submission, so every later service
// reads one absolute deadline.
func anchorDeadline(j *events.Job, submitted time.Time) {
	if j.StartWithin != nil && j.StartBefore == nil {
		t := j.StartWithin.AddTo(submitted).UTC()
		j.StartBefore = &t
	}
}
