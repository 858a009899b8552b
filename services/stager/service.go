// Package stager moves the files a job names into its working directory before it is
// queued and out of it after it ends, then cleans up. It records every transfer attempt
// as an event. It does not choose clusters, start jobs or decide terminal states.
package stager

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/gridwire/gridwire/events"
	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/sync/errgroup"
)

// Config is the stager's plain configuration. The zero value is valid.
type Config struct {
	Durable string // consumer name prefix shared by every stager process
	Workers int    // jobs staged at once per direction
}

// Validate reports configuration errors.
func (c Config) Validate() error {
	if c.Workers < 0 {
		return fmt.Errorf("stager: workers %d < 0", c.Workers)
	}
	return nil
}

// Store is what the stager needs of the event store.
type Store interface {
	Decide(ctx context.Context, jobID string, decide events.Decision) (events.State, error)
}

// Deps are the stager's live collaborators.
type Deps struct {
	JS     jetstream.JetStream
	Store  Store
	Logger *slog.Logger
	Now    func() time.Time
}

// Run consumes incarnated jobs (stage-in) and exited jobs (stage-out) until ctx ends.
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
		cfg.Durable = "stager"
	}
	s := stager{deps: deps}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		return events.Consume(gctx, deps.JS, events.ConsumerSpec{
			Durable: cfg.Durable + "-in", Filters: []string{events.TypeFilter(events.Incarnated, "")},
			Workers: cfg.Workers, Logger: deps.Logger, OnExhausted: s.exhausted,
		}, s.stageIn)
	})
	g.Go(func() error {
		return events.Consume(gctx, deps.JS, events.ConsumerSpec{
			Durable: cfg.Durable + "-out", Filters: []string{events.TypeFilter(events.Exited, "")},
			Workers: cfg.Workers, Logger: deps.Logger, OnExhausted: s.exhausted,
		}, s.stageOut)
	})
	return g.Wait()
}

type stager struct{ deps Deps }

// stageIn hands an incarnated job to its cluster. The foundation has no files to move.
func (s stager) stageIn(ctx context.Context, d events.Delivery) error {
	_, err := s.deps.Store.Decide(ctx, d.Event.JobID, func(st events.State) ([]events.Event, error) {
		if st.Status != events.StatusIncarnated {
			return nil, nil
		}
		now := s.deps.Now()
		if st.CancelRequested {
			e, err := events.New(st.JobID, events.Cancelled, "", now, events.EndData{Reason: "cancelled before it was queued"})
			return []events.Event{e}, err
		}
		e, err := events.New(st.JobID, events.Queued, st.Cluster, now, events.QueuedData{Cluster: st.Cluster})
		return []events.Event{e}, err
	})
	return err
}

// stageOut records that an exited job's stage-out is done. The foundation has no files.
func (s stager) stageOut(ctx context.Context, d events.Delivery) error {
	_, err := s.deps.Store.Decide(ctx, d.Event.JobID, func(st events.State) ([]events.Event, error) {
		if st.Status != events.StatusStagingOut || st.StagedOut != nil {
			return nil, nil
		}
		e, err := events.New(st.JobID, events.StagedOut, st.Cluster, s.deps.Now(), events.StagedOutData{OK: true})
		return []events.Event{e}, err
	})
	return err
}

func (s stager) exhausted(ctx context.Context, d events.Delivery, cause error) {
	_, err := s.deps.Store.Decide(ctx, d.Event.JobID, func(st events.State) ([]events.Event, error) {
		if st.Status.Terminal() {
			return nil, nil
		}
		e, err := events.New(st.JobID, events.Failed, "", s.deps.Now(), events.EndData{
			ExitCode: st.ExitCode, Reason: "staging failed on every attempt: " + cause.Error()})
		return []events.Event{e}, err
	})
	if err != nil {
		s.deps.Logger.Error("recording exhausted staging", "job", d.Event.JobID, "err", err)
	}
}
