// Package executor starts incarnated jobs on their cluster's target and records the
// run it started. It never waits on a job: it starts it, records the native ID and moves
// on; the watcher follows the job from there. Any number of executor processes may share
// one cluster's work through a durable consumer filtered to that cluster, and any of
// them may die: starting is idempotent, so the process that takes a job over records the
// run that already exists instead of starting a second one.
package executor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/pkg/cluster"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Config is the executor's plain configuration.
type Config struct {
	Cluster    cluster.Cluster // the one cluster this executor serves
	ID         string          // this process's name in started events
	Workers    int             // starts in flight per process; default 8
	MaxDeliver int             // start attempts before the job fails; default 5
}

// Validate reports configuration errors.
func (c Config) Validate() error {
	if c.Cluster.Name == "" {
		return errors.New("executor: no cluster configured")
	}
	if c.Cluster.Kind != cluster.KindFork {
		return fmt.Errorf("executor: cluster %s: kind %q is not supported yet", c.Cluster.Name, c.Cluster.Kind)
	}
	return nil
}

// Store is what the executor needs of the event store.
type Store interface {
	State(ctx context.Context, jobID string) (events.State, error)
	StateAt(ctx context.Context, e events.Event) (events.State, error)
	DecideFrom(ctx context.Context, st events.State, decide events.Decision) (events.State, error)
}

// Deps are the executor's live collaborators.
type Deps struct {
	JS     jetstream.JetStream
	Conn   *nats.Conn // for exit hints to the watcher
	Store  Store
	Logger *slog.Logger
	Now    func() time.Time
}

// Target starts a job's run on a target system. Start must be idempotent: if a run of
// the job already exists there, it returns that run with Adopted set.
type Target interface {
	Start(ctx context.Context, st events.State) (events.StartedData, error)
}

// Run serves the cluster's queue until ctx ends.
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
	if cfg.Workers <= 0 {
		cfg.Workers = 8
	}
	if cfg.MaxDeliver <= 0 {
		cfg.MaxDeliver = 5
	}
	log := deps.Logger.With("cluster", cfg.Cluster.Name)
	x := &executor{cfg: cfg, deps: deps, log: log,
		target: &ForkTarget{Cluster: cfg.Cluster.Name, Hints: deps.Conn, Logger: log}}
	return events.Consume(ctx, deps.JS, events.ConsumerSpec{
		Durable:    "executor-" + cfg.Cluster.Name,
		Filters:    []string{events.TypeFilter(events.Queued, cfg.Cluster.Name)},
		Workers:    cfg.Workers,
		Batch:      cfg.Workers,
		MaxDeliver: cfg.MaxDeliver,
		AckWait:    30 * time.Second,
		Logger:     log, OnExhausted: x.exhausted,
	}, x.handle)
}

type executor struct {
	cfg    Config
	deps   Deps
	log    *slog.Logger
	target Target
}

func (x *executor) handle(ctx context.Context, d events.Delivery) error {
	st, err := x.deps.Store.StateAt(ctx, d.Event)
	if err != nil {
		return err
	}
	if st.Status != events.StatusQueued || st.NativeID != "" {
		return nil // started already, or no longer wanted
	}
	if st.CancelRequested {
		_, err := x.deps.Store.DecideFrom(ctx, st, x.cancelBeforeStart)
		return err
	}
	run, err := x.target.Start(ctx, st)
	if err != nil {
		return fmt.Errorf("starting job %s: %w", st.JobID, err)
	}
	run.Executor = x.cfg.ID
	_, err = x.deps.Store.DecideFrom(ctx, st, func(s events.State) ([]events.Event, error) {
		if s.Status != events.StatusQueued || s.NativeID != "" {
			return nil, nil
		}
		e, err := events.New(s.JobID, events.Started, x.cfg.Cluster.Name, x.deps.Now(), run)
		return []events.Event{e}, err
	})
	if err == nil {
		x.log.Debug("started", "job", st.JobID, "native_id", run.NativeID, "adopted", run.Adopted)
	}
	return err
}

func (x *executor) cancelBeforeStart(s events.State) ([]events.Event, error) {
	if s.Status != events.StatusQueued || s.NativeID != "" {
		return nil, nil
	}
	e, err := events.New(s.JobID, events.Cancelled, "", x.deps.Now(), events.EndData{Reason: "cancelled before it started"})
	return []events.Event{e}, err
}

// exhausted turns a job whose every start attempt failed into a FAILED job.
func (x *executor) exhausted(ctx context.Context, d events.Delivery, cause error) {
	st, err := x.deps.Store.State(ctx, d.Event.JobID)
	if err == nil {
		_, err = x.deps.Store.DecideFrom(ctx, st, func(s events.State) ([]events.Event, error) {
			if s.Status != events.StatusQueued || s.NativeID != "" {
				return nil, nil
			}
			e, err := events.New(s.JobID, events.Failed, "", x.deps.Now(), events.EndData{
				Reason: fmt.Sprintf("could not start on %s after %d attempts: %v", x.cfg.Cluster.Name, d.Delivered, cause)})
			return []events.Event{e}, err
		})
	}
	if err != nil {
		x.log.Error("recording exhausted start", "job", d.Event.JobID, "err", err)
	}
}
