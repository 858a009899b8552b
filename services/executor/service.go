// Package executor starts incarnated jobs on their cluster's target and records the
// run it started, carries out the cancel, hold and resume requests of started jobs, and,
// under a cluster's retention, removes ended jobs' working directories (retention.go).
// It never waits on a job: it starts it, records the native ID and moves on; the watcher
// follows the job from there. Any number of executor processes may share one cluster's
// work through a durable consumer filtered to that cluster, and any of them may die:
// starting is idempotent, so the process that takes a job over records the run that
// already exists instead of starting a second one.
//
// Targets: ForkTarget (detached processes on this host), ScriptTarget (the profile's
// START on ssh hosts over pooled connections, or a batch system's clients here), chosen
// by NewTarget from the cluster's kind and profile. ControlAPI is the HTTP way in for
// requests. The executor does not render scripts (the incarnator does) nor observe jobs
// (the watcher does).
package executor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/pkg/cluster"
	"github.com/gridwire/gridwire/pkg/target"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/sync/errgroup"
)

// Config is the executor's plain configuration.
type Config struct {
	Cluster    cluster.Cluster // the one cluster this executor serves
	ID         string          // this process's name in started events
	Workers    int             // starts in flight per process; default 8
	MaxDeliver int             // start attempts before the job fails; default 5
	// AckWait is how long a delivery is owned by this process without a sign of life;
	// a start's heartbeat (every third of it) extends it while the start runs. Default
	// 30s: a dead executor's jobs go to another process after it.
	AckWait time.Duration

	// WorkRoot is the cluster's work root as the incarnator makes job directories in it:
	// the only place the retention removes anything from. Required with a retention.
	WorkRoot string
	// SweepEvery is how often the retention's schedule is looked at besides when it
	// changes; default one minute.
	SweepEvery time.Duration
	// RemoveTries bounds the runs of a failing DELETE before its failure is recorded;
	// default 3, RemoveBackoff (default 2s) apart, doubling.
	RemoveTries   int
	RemoveBackoff time.Duration
	// ClaimStale is how long another process's claim on a due removal is left alone;
	// default 10 minutes.
	ClaimStale time.Duration
}

// Validate reports configuration errors.
func (c Config) Validate() error {
	if c.Cluster.Name == "" {
		return errors.New("executor: no cluster configured")
	}
	switch c.Cluster.Kind {
	case cluster.KindFork:
	case cluster.KindSSH:
		if len(c.Cluster.Hosts) == 0 {
			return fmt.Errorf("executor: cluster %s: kind ssh needs hosts", c.Cluster.Name)
		}
	default:
		return fmt.Errorf("executor: cluster %s: kind %q is neither fork nor ssh", c.Cluster.Name, c.Cluster.Kind)
	}
	if c.Workers < 0 || c.MaxDeliver < 0 || c.AckWait < 0 || c.SweepEvery < 0 || c.RemoveTries < 0 || c.RemoveBackoff < 0 || c.ClaimStale < 0 {
		return fmt.Errorf("executor: cluster %s: negative workers, max deliveries, ack wait or retention setting", c.Cluster.Name)
	}
	if c.Cluster.Retention != nil && !strings.HasPrefix(c.WorkRoot, "/") {
		return fmt.Errorf("executor: cluster %s: a retention needs the cluster's work root, an absolute path (have %q)", c.Cluster.Name, c.WorkRoot)
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
	// Target runs the cluster's jobs; nil means the one the cluster's kind and profile
	// call for (NewTarget).
	Target Target
	// Properties, when set, is the property API the targets NewTarget makes hand DDS
	// tasks (a Target given above carries its own).
	Properties *Properties
}

// Target starts a job's run on a target system. Start must be idempotent: if a run of
// the job already exists there, it returns that run with Adopted set.
type Target interface {
	Start(ctx context.Context, st events.State) (events.StartedData, error)
}

// RunFinder is a Target that can tell, without starting anything, whether an earlier
// attempt started a job: an executor that died after START ran and before its started
// event landed. found is false when nothing ran (or the START that ran failed); an
// error (errStartInProgress among them) asks for the delivery again.
type RunFinder interface {
	FindRun(ctx context.Context, st events.State) (run events.StartedData, found bool, err error)
}

// Controller runs a job's ABORT, HOLD or RESUME script on the target that runs it. A
// script that ran and failed is an Output with a non-zero exit, recorded as
// action_failed; an error means it could not be run and is retried.
type Controller interface {
	Control(ctx context.Context, st events.State, script string) (target.Output, error)
}

// Run serves the cluster's queue and its control requests until ctx ends.
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
	if cfg.AckWait <= 0 {
		cfg.AckWait = 30 * time.Second
	}
	cfg = retentionDefaults(cfg)
	log := deps.Logger.With("cluster", cfg.Cluster.Name)
	tg := deps.Target
	if tg == nil {
		t, closeTarget, err := NewTarget(cfg.Cluster, deps.Conn, log)
		if err != nil {
			return err
		}
		defer closeTarget()
		withProperties(t, deps.Properties)
		tg = t
	}
	ctl, ok := tg.(Controller)
	if !ok {
		return fmt.Errorf("executor: cluster %s: its target cannot abort, hold or resume jobs", cfg.Cluster.Name)
	}
	x := &executor{cfg: cfg, deps: deps, log: log, target: tg, ctl: ctl}
	g, gctx := errgroup.WithContext(ctx)
	if cfg.Cluster.Retention != nil {
		rm, ok := tg.(Remover)
		if !ok {
			return fmt.Errorf("executor: cluster %s has a retention, but its target cannot remove directories", cfg.Cluster.Name)
		}
		g.Go(func() error { return x.runRetention(gctx, rm) })
	}
	g.Go(func() error {
		return events.Consume(gctx, deps.JS, events.ConsumerSpec{
			Durable:    "executor-" + cfg.Cluster.Name,
			Filters:    []string{events.TypeFilter(events.Queued, cfg.Cluster.Name)},
			Workers:    cfg.Workers,
			Batch:      min(cfg.Workers, 8), // small: a dead process strands few deliveries
			MaxDeliver: cfg.MaxDeliver,
			AckWait:    cfg.AckWait,
			Heartbeat:  cfg.AckWait / 3, // a slow START keeps its delivery
			Logger:     log, OnExhausted: x.exhausted,
		}, x.handle)
	})
	g.Go(func() error {
		return events.Consume(gctx, deps.JS, events.ConsumerSpec{
			Durable: "executor-control-" + cfg.Cluster.Name,
			Filters: []string{events.TypeFilter(events.CancelRequested, cfg.Cluster.Name),
				events.TypeFilter(events.HoldRequested, cfg.Cluster.Name),
				events.TypeFilter(events.ResumeRequested, cfg.Cluster.Name)},
			Workers: 4, Batch: 4, MaxDeliver: cfg.MaxDeliver, AckWait: cfg.AckWait,
			Logger: log, OnExhausted: x.controlExhausted,
		}, x.control)
	})
	return g.Wait()
}

type executor struct {
	cfg    Config
	deps   Deps
	log    *slog.Logger
	target Target
	ctl    Controller
}

// handle starts a queued job, or records the run an earlier attempt started. Requests
// that came while it was being started (cancel, hold) are carried out once it runs.
func (x *executor) handle(ctx context.Context, d events.Delivery) error {
	st, err := x.deps.Store.StateAt(ctx, d.Event)
	if err != nil {
		return err
	}
	if st.NativeID != "" {
		// Started: only a request made meanwhile may be left. The state folded up to
		// this delivery may be older than the log; act on the latest.
		latest, err := x.deps.Store.State(ctx, st.JobID)
		if err != nil {
			return err
		}
		if latest.LastSeq > st.LastSeq {
			st = latest
		}
		return x.act(ctx, st)
	}
	if st.Status != events.StatusQueued {
		if d.Delivered > 1 && st.Status.Terminal() && st.NativeID == "" {
			// An earlier attempt of this delivery may have started the job after it
			// ended, and failed to abort that run (recordStarted): look once more.
			return x.abortLeftRun(ctx, d, st)
		}
		return nil // no longer wanted
	}
	if st.CancelRequested {
		// A job cancelled before it started must not start. But an earlier attempt may
		// have started it and died before saying so: that run is recorded (adopted),
		// and the cancel request then aborts it like any other, instead of the job
		// ending CANCELLED in the log while it runs on the target.
		if f, ok := x.target.(RunFinder); ok {
			run, found, err := x.findRun(ctx, d, f, st)
			if err != nil {
				return fmt.Errorf("looking for an earlier start of job %s: %w", st.JobID, err)
			}
			if found {
				return x.recordStarted(ctx, st, run)
			}
		}
		_, err := x.deps.Store.DecideFrom(ctx, st, x.cancelBeforeStart)
		return err
	}
	if st.Job.Coallocated() {
		var start bool
		if st, start, err = x.coallocate(ctx, st); err != nil || !start {
			return err
		}
		if st.CancelRequested {
			_, err := x.deps.Store.DecideFrom(ctx, st, x.cancelBeforeStart)
			return err
		}
		if handled, err := x.startInGroup(ctx, st); handled || err != nil {
			return err
		}
	}
	run, err := x.target.Start(ctx, st)
	if err != nil {
		return fmt.Errorf("starting job %s: %w", st.JobID, err)
	}
	return x.recordStarted(ctx, st, run)
}

// findRun asks the target for an earlier attempt's run, waiting (the consumer's heartbeat
// keeps the delivery) while another attempt's start is in progress, up to the target's stale-lock
// window: a redelivery per look would spend the job's budget of real failures.
func (x *executor) findRun(ctx context.Context, d events.Delivery, f RunFinder, st events.State) (events.StartedData, bool, error) {
	deadline := time.Now().Add(2 * staleOf(x.target))
	for {
		run, found, err := f.FindRun(ctx, st)
		if !errors.Is(err, errStartInProgress) || time.Now().After(deadline) {
			return run, found, err
		}
		select {
		case <-ctx.Done():
			return run, found, err
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// staleOf is how long the target trusts a start lock without a result.
func staleOf(t Target) time.Duration {
	if s, ok := t.(interface{ stale() time.Duration }); ok {
		return s.stale()
	}
	return 10 * time.Second
}

// recordStarted appends the started event of a run (started now, or adopted), then
// carries out any request that came meanwhile.
func (x *executor) recordStarted(ctx context.Context, st events.State, run events.StartedData) error {
	run.Executor = x.cfg.ID
	st, err := x.deps.Store.DecideFrom(ctx, st, func(s events.State) ([]events.Event, error) {
		if s.Status != events.StatusQueued || s.NativeID != "" {
			return nil, nil
		}
		e, err := events.New(s.JobID, events.Started, x.cfg.Cluster.Name, x.deps.Now(), run)
		return []events.Event{e}, err
	})
	if err != nil {
		return err
	}
	if st.NativeID == "" {
		return x.abortOrphan(ctx, st, run)
	}
	x.log.Debug("started", "job", st.JobID, "native_id", run.NativeID, "adopted", run.Adopted)
	return x.act(ctx, st)
}

// abortOrphan stops a run whose job ended before the run could be recorded: a cancel (or
// the exhaustion of the job's deliveries) decided by another attempt of the same
// delivery, one that found no run yet while this attempt was starting it (an executor
// cut off from NATS for longer than the ack wait goes on starting). The log says the job
// ended before it started, and no event can follow an end: the run is aborted with the
// profile's ABORT so that the log stays true. An ABORT that cannot be run is an error,
// and the redelivery finds the run again (abortLeftRun).
func (x *executor) abortOrphan(ctx context.Context, st events.State, run events.StartedData) error {
	if !st.Status.Terminal() {
		return nil
	}
	orphan := st
	orphan.NativeID, orphan.Host, orphan.HostKey = run.NativeID, run.Host, run.HostKey
	out, err := x.ctl.Control(ctx, orphan, events.ScriptAbort)
	if err != nil {
		return fmt.Errorf("aborting the run %s of job %s, which ended %s before the run was recorded: %w",
			run.NativeID, st.JobID, st.Status, err)
	}
	x.log.Warn("aborted a run started for a job that ended before it was recorded", "job", st.JobID,
		"native_id", run.NativeID, "status", st.Status, "reason", st.Reason, "ok", out.OK(), "output", out.Describe())
	return nil
}

// abortLeftRun is abortOrphan on a redelivery: the run an earlier attempt left, if the
// target can find one.
func (x *executor) abortLeftRun(ctx context.Context, d events.Delivery, st events.State) error {
	f, ok := x.target.(RunFinder)
	if !ok {
		return nil
	}
	run, found, err := x.findRun(ctx, d, f, st)
	if err != nil {
		return fmt.Errorf("looking for a run of job %s, which ended %s before it started: %w", st.JobID, st.Status, err)
	}
	if !found {
		return nil
	}
	return x.abortOrphan(ctx, st, run)
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
	st, err := x.deps.Store.StateAt(ctx, d.Event)
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
