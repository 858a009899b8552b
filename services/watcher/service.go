// Package watcher follows every started job on its target until it ends and decides its
// terminal state once stage-out is recorded: the log's "what happened". It observes; it
// never starts, stops or stages anything, and it serves no one (the read side shows
// what it records). A failed observation is recorded as status_unknown, never as an
// invented end. It also owns group decisions: a parent record's state, derived from its
// children's, and the requests made of a parent, carried to its children (group.go).
package watcher

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
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"
)

// Config is the watcher's plain configuration. The zero value follows no cluster and
// only decides terminal states.
type Config struct {
	Clusters []cluster.Cluster // clusters this watcher follows
	// PollMin and PollMax bound the adaptive poll interval (defaults 50ms and 2s).
	PollMin, PollMax time.Duration
	// VanishGrace is how long a job may be gone from its target without an exit status
	// before it is recorded as ended without one (default 30s).
	VanishGrace time.Duration
}

// Validate reports configuration errors.
func (c Config) Validate() error {
	if c.PollMin < 0 || c.PollMax < 0 || (c.PollMax > 0 && c.PollMin > c.PollMax) {
		return fmt.Errorf("watcher: poll interval bounds %v..%v", c.PollMin, c.PollMax)
	}
	return nil
}

func (c Config) withDefaults() Config {
	if c.PollMin == 0 {
		c.PollMin = 50 * time.Millisecond
	}
	if c.PollMax == 0 {
		c.PollMax = 2 * time.Second
	}
	if c.VanishGrace == 0 {
		c.VanishGrace = 30 * time.Second
	}
	return c
}

// Store is what the watcher needs of the event store.
type Store interface {
	State(ctx context.Context, jobID string) (events.State, error)
	Decide(ctx context.Context, jobID string, decide events.Decision) (events.State, error)
	// DecideLatest decides from the state this process last folded, when it has one:
	// for what a probe saw, which is news the log does not have yet.
	DecideLatest(ctx context.Context, jobID string, decide events.Decision) (events.State, error)
	DecideOn(ctx context.Context, e events.Event, decide events.Decision) (events.State, error)
	StateAt(ctx context.Context, e events.Event) (events.State, error)
	// StateFresh and DecideFresh read a job as the log holds it now, whichever server of
	// a cluster answers: for decisions that read other jobs than the one they append to
	// (a group's children), which the append's condition does not cover.
	StateFresh(ctx context.Context, jobID string) (events.State, error)
	DecideFresh(ctx context.Context, jobID string, decide events.Decision) (events.State, error)
}

// Deps are the watcher's live collaborators.
type Deps struct {
	JS     jetstream.JetStream
	Conn   *nats.Conn // exit hints
	Store  Store
	Logger *slog.Logger
	Now    func() time.Time
	// Probers observe jobs on a cluster, by cluster name; a fork cluster with none gets
	// a ForkProber.
	Probers map[string]Prober
	// Metrics, when set, receives the watcher's metrics: status polls and their
	// failures per cluster.
	Metrics prometheus.Registerer

	parents *keyedMutex // group decisions on one parent take turns (runGroups)
}

// Run follows the configured clusters and decides terminal states until ctx ends.
func Run(ctx context.Context, cfg Config, deps Deps) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	cfg = cfg.withDefaults()
	if deps.Now == nil {
		deps.Now = time.Now
	}
	if deps.Logger == nil {
		deps.Logger = slog.New(slog.DiscardHandler)
	}
	// A server that does not answer while the watcher starts (one restarting) is asked
	// again, as its consumers do.
	var kv jetstream.KeyValue
	stopped, err := events.RetryTransient(ctx, 0, func(wait time.Duration, err error) {
		deps.Logger.Warn("opening the watch bucket; trying again", "in", wait, "err", err)
	}, func() (err error) {
		kv, err = watchBucket(ctx, deps.JS)
		return err
	})
	if stopped {
		return nil
	}
	if err != nil {
		return err
	}
	polls, err := newPollMetrics(deps.Metrics)
	if err != nil {
		return err
	}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return runEnder(gctx, deps) })
	g.Go(func() error { return runGroups(gctx, deps) })
	g.Go(func() error { return runGroupRequests(gctx, deps) })
	g.Go(func() error { return runRestarts(gctx, deps) })
	g.Go(func() error { return runSessionUpdates(gctx, deps) })
	for _, cl := range cfg.Clusters {
		p := deps.Probers[cl.Name]
		if p == nil {
			if cl.Kind != cluster.KindFork {
				return fmt.Errorf("watcher: cluster %s (%s) has no prober", cl.Name, cl.Kind)
			}
			p = ForkProber{}
		}
		f := newFollower(cfg, deps, cl.Name, kv, polls.count(cl.Name, p))
		if _, fork := p.(ForkProber); fork && deps.Conn != nil {
			f.settle = forkSettle
		}
		g.Go(func() error { return f.run(gctx) })
	}
	return g.Wait()
}

// runEnder appends the terminal event of every job whose stage-out is recorded.
func runEnder(ctx context.Context, deps Deps) error {
	decide := func(st events.State) ([]events.Event, error) {
		if st.Status != events.StatusStagingOut || st.StagedOut == nil {
			return nil, nil
		}
		return []events.Event{terminal(st, deps.Now())}, nil
	}
	return events.Consume(ctx, deps.JS, events.ConsumerSpec{
		Durable: "watcher-end", Filters: []string{events.TypeFilter(events.StagedOut, "")},
		Workers: 32, Logger: deps.Logger,
	}, func(ctx context.Context, d events.Delivery) error {
		_, err := deps.Store.DecideOn(ctx, d.Event, decide)
		if errors.Is(err, events.ErrIllegalTransition) {
			deps.Logger.Error("terminal decision refused", "job", d.Event.JobID, "err", err)
			return nil
		}
		return err
	})
}

// terminal is SUCCEEDED only for exit code 0 with a clean stage-out.
func terminal(st events.State, now time.Time) events.Event {
	code := st.ExitCode
	name, reason := events.Succeeded, ""
	switch {
	case code == nil || *code != 0:
		name, reason = events.Failed, st.Reason
		if reason == "" && code != nil {
			reason = fmt.Sprintf("exit code %d", *code)
		}
	case !st.StagedOut.OK:
		name, reason = events.Failed, "stage-out failed: "+st.StagedOut.Reason
	}
	e, _ := events.New(st.JobID, name, "", now, events.EndData{ExitCode: code, Reason: reason})
	return e
}
