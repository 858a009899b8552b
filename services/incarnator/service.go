// Package incarnator turns submitted canonical jobs into runnable incarnations: it
// chooses a cluster from the job's requirements, renders the job's scripts through the
// cluster's OS profile, and records all of it in an incarnated event. It does not run
// anything (the executor does) or move files (the stager does).
package incarnator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/gridwire/gridwire/events"
	"github.com/nats-io/nats.go/jetstream"
)

// Config is the incarnator's plain configuration. The zero value is valid.
type Config struct {
	// Durable is the consumer name shared by every incarnator process.
	Durable string
	// Workers is how many jobs one process renders at once.
	Workers int
}

// Validate reports configuration errors.
func (c Config) Validate() error {
	if c.Workers < 0 {
		return fmt.Errorf("incarnator: workers %d < 0", c.Workers)
	}
	return nil
}

// Planner chooses a cluster for one attempt of a job and renders its scripts.
type Planner interface {
	PlanAttempt(job events.Job, attempt int) (events.IncarnatedData, error)
}

// NoMatchError says why no cluster can run a job: per cluster, what excluded it.
type NoMatchError struct {
	Job      string
	Excluded map[string]string // cluster → reason
	// Rendering says a cluster matched but its profile could not render the job.
	Rendering bool
}

func (e *NoMatchError) Error() string {
	msg := "no cluster matches the job's requirements"
	if e.Rendering {
		msg = "no cluster can run the job"
	}
	for _, name := range sortedNames(e.Excluded) {
		msg += fmt.Sprintf("; %s: %s", name, e.Excluded[name])
	}
	return msg
}

// ErrRejected marks a job that can never be incarnated (a field out of range, a
// non-settable field set, ...); the job fails with the message.
var ErrRejected = errors.New("incarnator: job rejected")

// Store is what the incarnator needs of the event store.
type Store interface {
	DecideFrom(ctx context.Context, st events.State, decide events.Decision) (events.State, error)
	Decide(ctx context.Context, jobID string, decide events.Decision) (events.State, error)
}

// Deps are the incarnator's live collaborators.
type Deps struct {
	JS      jetstream.JetStream
	Store   Store
	Planner Planner
	Logger  *slog.Logger
	Now     func() time.Time
}

// Run consumes submitted jobs until ctx ends.
func Run(ctx context.Context, cfg Config, deps Deps) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	if deps.Now == nil {
		deps.Now = time.Now
	}
	if deps.Logger == nil {
		deps.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Durable == "" {
		cfg.Durable = "incarnator"
	}
	h := handler{deps: deps}
	return events.Consume(ctx, deps.JS, events.ConsumerSpec{
		Durable: cfg.Durable, Filters: []string{events.TypeFilter(events.Submitted, ""), events.TypeFilter(events.Restarted, "")},
		Workers: cfg.Workers, Logger: deps.Logger, OnExhausted: h.exhausted,
	}, h.handle)
}

type handler struct{ deps Deps }

func (h handler) handle(ctx context.Context, d events.Delivery) error {
	if d.Event.Name == events.Restarted {
		// A new attempt of a job that crashed: placed and rendered afresh.
		_, err := h.deps.Store.Decide(ctx, d.Event.JobID, h.decide)
		return err
	}
	st, err := events.Apply(events.State{}, d.Event)
	if err != nil {
		return nil // not a first event we can fold alone; nothing for us
	}
	if st.Job.Kind == events.KindGroup {
		return nil
	}
	_, err = h.deps.Store.DecideFrom(ctx, st, h.decide)
	return err
}

// decide incarnates a submitted job; any other state means the work is done.
func (h handler) decide(st events.State) ([]events.Event, error) {
	if st.Status != events.StatusSubmitted {
		return nil, nil
	}
	now := h.deps.Now()
	if st.CancelRequested {
		e, err := events.New(st.JobID, events.Cancelled, "", now, events.EndData{Reason: "cancelled before incarnation"})
		return []events.Event{e}, err
	}
	plan, err := h.deps.Planner.PlanAttempt(*st.Job, st.Attempt())
	var nm *NoMatchError
	if errors.As(err, &nm) || errors.Is(err, ErrRejected) {
		e, eerr := events.New(st.JobID, events.Failed, "", now, events.EndData{Reason: err.Error()})
		return []events.Event{e}, eerr
	}
	if err != nil {
		return nil, fmt.Errorf("planning job %s: %w", st.JobID, err)
	}
	e, err := events.New(st.JobID, events.Incarnated, "", now, plan)
	return []events.Event{e}, err
}

func (h handler) exhausted(ctx context.Context, d events.Delivery, cause error) {
	st, err := events.Apply(events.State{}, d.Event)
	if err != nil {
		return
	}
	_, err = h.deps.Store.DecideFrom(ctx, st, func(st events.State) ([]events.Event, error) {
		if st.Status.Terminal() {
			return nil, nil
		}
		e, err := events.New(st.JobID, events.Failed, "", h.deps.Now(), events.EndData{
			Reason: "incarnation failed on every attempt: " + cause.Error()})
		return []events.Event{e}, err
	})
	if err != nil {
		h.deps.Logger.Error("recording exhausted incarnation", "job", d.Event.JobID, "err", err)
	}
}

func sortedNames(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j] < out[j-1]; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}
