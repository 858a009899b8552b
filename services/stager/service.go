// Package stager moves the files a job names into its working directory before it is
// queued and out of it after it ends, then cleans up. Every transfer attempt is an event
// (file, direction, attempt k of N, bytes, duration, SHA-256 or error), and a file's
// progress is read back from those events, so a restarted stager resumes where the log
// says, without repeating or losing an attempt. It checks staging names at submission
// (CheckURLs) and uploads a submitter's local inputs (Upload). It does not choose
// clusters, start jobs or decide terminal states after stage-out (the watcher does).
package stager

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/pkg/cluster"
	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/sync/errgroup"
)

// Defaults of Config's zero fields.
const (
	DefaultMaxTransferAttempts = 3
	DefaultParallel            = 4
	DefaultBackoffBase         = time.Second
	DefaultBackoffMax          = time.Minute
	DefaultIdleTimeout         = 2 * time.Minute
)

// Config is the stager's plain configuration. The zero value is valid: jobs run on the
// gateway's own disk, three attempts per file, the default HTTP policy. The yaml names
// are those of the `stager:` section of the operator's config file.
type Config struct {
	Durable string `yaml:"durable,omitempty"` // consumer name prefix shared by every stager process
	Workers int    `yaml:"workers,omitempty"` // jobs staged at once per direction
	// Clusters says where each cluster's working directories are: a fork cluster's on
	// this machine, an ssh cluster's on its first host (or the host the job ran on),
	// reached over SFTP with the cluster's user, identity and known_hosts.
	Clusters cluster.Config `yaml:"-"`
	// MaxTransferAttempts is a file's budget when neither it nor its job names one;
	// 0 means Clusters.MaxTransferAttempts, then DefaultMaxTransferAttempts.
	MaxTransferAttempts int `yaml:"max_transfer_attempts,omitempty"`
	// Parallel bounds the transfers of one job that run at once.
	Parallel int `yaml:"parallel,omitempty"`
	// BackoffBase and BackoffMax shape the wait between attempts at one file:
	// base·2^(k-1) after attempt k, capped at max, with jitter.
	BackoffBase time.Duration `yaml:"backoff_base,omitempty"`
	BackoffMax  time.Duration `yaml:"backoff_max,omitempty"`
	// MaxFileBytes bounds one file (or one directory, in total); 0 means no limit.
	MaxFileBytes int64 `yaml:"max_file_bytes,omitempty"`
	// IdleTimeout cancels an attempt through which no byte flowed for this long.
	IdleTimeout time.Duration `yaml:"idle_timeout,omitempty"`
	// HTTP is the host policy of http(s) transfers.
	HTTP HTTPPolicy `yaml:"http,omitempty"`
	// FileRoots are the gateway directories jobs may name with file:// URLs and
	// absolute paths, per access, cluster and principal. None: no gateway file at all.
	FileRoots []FileRoot `yaml:"file_roots,omitempty"`
	// TargetPaths are the directories on a cluster's target (this machine for a fork
	// cluster, the cluster's host for an ssh one) that jobs may name as absolute input
	// and output paths, per access, cluster and principal. None: every absolute path
	// on the target is refused.
	TargetPaths []FileRoot `yaml:"target_paths,omitempty"`
	// Protected are gateway paths staging never reads or writes, even inside a root:
	// the gateway's data directory, config file and keys. cmd/gridwire fills in its own
	// (data, config, NATS credentials); the stager adds every identity, known_hosts and
	// CA file of its config; the operator may name more.
	Protected []string `yaml:"protected,omitempty"`
	// SSH is how sftp:// and scp:// URLs are reached (their user@ overrides User).
	SSH SSHConfig `yaml:"ssh,omitempty"`
	// Plugins are external transfer commands for URL schemes the stager does not move
	// itself (gsiftp:// through globus-url-copy); see Plugin for the contract.
	Plugins []Plugin `yaml:"plugins,omitempty"`
}

// SSHConfig is how the stager logs in to hosts that sftp:// and scp:// URLs name.
type SSHConfig struct {
	User       string `yaml:"user,omitempty"`
	Identity   string `yaml:"identity,omitempty"`
	KnownHosts string `yaml:"known_hosts,omitempty"`
}

// Validate reports configuration errors.
func (c Config) Validate() error {
	var errs []error
	for _, n := range []struct {
		name string
		v    int64
	}{{"workers", int64(c.Workers)}, {"max_transfer_attempts", int64(c.MaxTransferAttempts)},
		{"parallel", int64(c.Parallel)}, {"backoff_base", int64(c.BackoffBase)},
		{"backoff_max", int64(c.BackoffMax)}, {"max_file_bytes", c.MaxFileBytes},
		{"idle_timeout", int64(c.IdleTimeout)}} {
		if n.v < 0 {
			errs = append(errs, fmt.Errorf("stager.%s: %d is below 0", n.name, n.v))
		}
	}
	if _, err := c.HTTP.compile(); err != nil {
		errs = append(errs, err)
	}
	for i, r := range c.FileRoots {
		if err := r.validate(fmt.Sprintf("stager.file_roots[%d]", i)); err != nil {
			errs = append(errs, err)
		}
	}
	for i, r := range c.TargetPaths {
		if err := r.validateTarget(fmt.Sprintf("stager.target_paths[%d]", i)); err != nil {
			errs = append(errs, err)
		}
	}
	if err := validatePlugins(c.Plugins); err != nil {
		errs = append(errs, err)
	}
	for i, p := range c.Protected {
		if !filepath.IsAbs(p) {
			errs = append(errs, fmt.Errorf("stager.protected[%d]: %q is not absolute", i, p))
		}
	}
	return errors.Join(errs...)
}

// protected is every path staging never touches: Protected, and the keys, known_hosts
// and CA files the config names.
func (c Config) protected() []string {
	paths := append([]string(nil), c.Protected...)
	paths = append(paths, c.SSH.Identity, c.SSH.KnownHosts, c.HTTP.CAFile)
	if c.Clusters.DataDir != "" {
		paths = append(paths, c.Clusters.DataDir)
	}
	for _, cl := range c.Clusters.Clusters {
		paths = append(paths, cl.Identity, cl.KnownHosts)
		if cl.Kind == cluster.KindFork {
			paths = append(paths, cl.WorkRoot) // other jobs' working directories
		}
	}
	return protectedPaths(paths)
}

func (c Config) withDefaults() Config {
	if c.Durable == "" {
		c.Durable = "stager"
	}
	if c.MaxTransferAttempts == 0 {
		c.MaxTransferAttempts = c.Clusters.MaxTransferAttempts
	}
	if c.MaxTransferAttempts == 0 {
		c.MaxTransferAttempts = DefaultMaxTransferAttempts
	}
	if c.Parallel == 0 {
		c.Parallel = DefaultParallel
	}
	if c.BackoffBase == 0 {
		c.BackoffBase = DefaultBackoffBase
	}
	if c.BackoffMax == 0 {
		c.BackoffMax = DefaultBackoffMax
	}
	if c.IdleTimeout == 0 {
		c.IdleTimeout = DefaultIdleTimeout
	}
	return c
}

// Store is what the stager needs of the event store.
type Store interface {
	Decide(ctx context.Context, jobID string, decide events.Decision) (events.State, error)
	// DecideFrom decides from a state already folded, reloading only on a conflict.
	DecideFrom(ctx context.Context, st events.State, decide events.Decision) (events.State, error)
	// DecideLatest decides from the state this process last folded, when it has one.
	DecideLatest(ctx context.Context, jobID string, decide events.Decision) (events.State, error)
	// StateAt is the job's state including at least the consumed event e.
	StateAt(ctx context.Context, e events.Event) (events.State, error)
}

// Deps are the stager's live collaborators.
type Deps struct {
	JS     jetstream.JetStream
	Store  Store
	Logger *slog.Logger
	Now    func() time.Time
	// Jitter spreads a back-off; the default picks uniformly in [d/2, d].
	Jitter func(d time.Duration) time.Duration
	// Resolver resolves the hosts of network transfers; nil is net.DefaultResolver.
	Resolver Resolver
}

func halfJitter(d time.Duration) time.Duration {
	if d <= 1 {
		return d
	}
	return d/2 + rand.N(d/2+1)
}

// Run consumes incarnated jobs (stage-in) and exited jobs (stage-out) until ctx ends.
// Transfers in flight when ctx ends are abandoned unrecorded; the next stager to get
// the job makes them again with the same attempt numbers.
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
	if deps.Jitter == nil {
		deps.Jitter = halfJitter
	}
	s, err := newStager(ctx, cfg, deps)
	if err != nil {
		return err
	}
	defer s.Close()
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		return events.Consume(gctx, deps.JS, events.ConsumerSpec{
			Durable: cfg.Durable + "-in", Filters: []string{events.TypeFilter(events.Incarnated, "")},
			Workers: cfg.Workers, Heartbeat: heartbeatEvery, Logger: deps.Logger, OnExhausted: s.exhausted,
		}, s.interruptible(gctx, s.stageIn))
	})
	g.Go(func() error {
		return events.Consume(gctx, deps.JS, events.ConsumerSpec{
			Durable: cfg.Durable + "-out", Filters: []string{events.TypeFilter(events.Exited, "")},
			Workers: cfg.Workers, Heartbeat: heartbeatEvery, Logger: deps.Logger, OnExhausted: s.exhausted,
		}, s.interruptible(gctx, s.stageOut))
	})
	return g.Wait()
}

// interruptible cancels a handler's transfers when the service stops: Consume gives
// handlers a context that outlives shutdown so appends finish; transfers must not.
func (s *stager) interruptible(run context.Context, h events.Handler) events.Handler {
	return func(ctx context.Context, d events.Delivery) error {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		stop := context.AfterFunc(run, cancel)
		defer stop()
		return h(ctx, d)
	}
}

// heartbeatEvery is how often a handler at work extends its message's ack deadline
// (the consumer's is 30 s): transfers, waits between attempts and slow servers all take
// longer than an ack deadline. A transfer that hangs is bounded by IdleTimeout, so the
// heartbeat cannot keep a job forever.
const heartbeatEvery = 5 * time.Second

type stager struct {
	cfg       Config
	deps      Deps
	http      *httpEndpoint
	ssh       *sshPools
	protected []string // resolved paths staging never touches
	plugins   plugins  // transfer plugins by URL scheme
}

func newStager(ctx context.Context, cfg Config, deps Deps) (*stager, error) {
	policy, err := cfg.HTTP.compile()
	if err != nil {
		return nil, err
	}
	plugs, err := startPlugins(ctx, cfg.Plugins, policy, deps.Resolver)
	if err != nil {
		return nil, err
	}
	roots, err := rootCAs(cfg.HTTP.CAFile)
	if err != nil {
		return nil, err
	}
	return &stager{cfg: cfg, deps: deps, http: newHTTPEndpoint(policy, cfg.IdleTimeout, roots, deps.Resolver),
		ssh: newSSHPools(deps.Logger, policy.dialer(&net.Dialer{Timeout: 30 * time.Second}, deps.Resolver)), protected: cfg.protected(), plugins: plugs}, nil
}

// Close releases the stager's connections.
func (s *stager) Close() error {
	s.http.client.CloseIdleConnections()
	return s.ssh.Close()
}

func (s *stager) copier() copier {
	return copier{limit: s.cfg.MaxFileBytes, idle: s.cfg.IdleTimeout, parallel: s.cfg.Parallel}
}

// jobOf is the job as its target sees it: the description with the values the
// incarnator substituted ({taskid}, {queue}, {lrms} in v3) put in place, so the stager
// moves the files the job's script reads and writes, not the literal placeholders.
func jobOf(st events.State) events.Job {
	if st.Job == nil {
		return events.Job{ID: st.JobID}
	}
	if st.Incarnation == nil {
		return *st.Job
	}
	return withSubstituted(*st.Job, st.Incarnation.Substituted)
}

// withSubstituted returns a copy of the job with each value the incarnation recorded as
// substituted (by field: executable, default_storage_base, stdin, stdout.N, stderr.N,
// stage_in.N.from, stage_in.N.to, stage_out.N.from, stage_out.N.to, cleanup.N) in place.
// The job's own lists are not changed.
func withSubstituted(job events.Job, sub map[string]string) events.Job {
	if len(sub) == 0 {
		return job
	}
	set := func(key string, v *string) {
		if s, ok := sub[key]; ok {
			*v = s
		}
	}
	set("executable", &job.Executable)
	set("default_storage_base", &job.DefaultStorageBase)
	set("stdin", &job.Stdin)
	list := func(name string, l []string) []string {
		out := slices.Clone(l)
		for i := range out {
			set(name+"."+strconv.Itoa(i), &out[i])
		}
		return out
	}
	job.Stdout, job.Stderr, job.Cleanup = list("stdout", job.Stdout), list("stderr", job.Stderr), list("cleanup", job.Cleanup)
	copies := func(name string, l []events.FileCopy) []events.FileCopy {
		out := slices.Clone(l)
		for i := range out {
			set(name+"."+strconv.Itoa(i)+".from", &out[i].From)
			set(name+"."+strconv.Itoa(i)+".to", &out[i].To)
		}
		return out
	}
	job.StageIn, job.StageOut = copies("stage_in", job.StageIn), copies("stage_out", job.StageOut)
	return job
}

// stageIn makes the working directory, records the plan, moves every file in, and
// hands the job to its cluster; a file that uses its budget fails the job.
func (s *stager) stageIn(ctx context.Context, d events.Delivery) error {
	st, err := s.deps.Store.StateAt(ctx, d.Event)
	if err != nil || (st.Status != events.StatusIncarnated && st.Status != events.StatusStagingIn) {
		return err
	}
	job, err := s.targetJob(ctx, st)
	if err != nil {
		return err
	}
	items := planIn(job, s.cfg.MaxTransferAttempts, s.plugins.schemes())
	uses := usesJobDir(items)
	dd, err := s.openDirs(ctx, st, job, uses, AccessWrite)
	if errors.Is(err, ErrJobDir) {
		return s.finishIn(ctx, st.JobID, nil, err)
	}
	if err != nil {
		return err
	}
	defer dd.Close()
	if err := dd.wd.create(ctx); err != nil {
		return err
	}
	// The job's directory is made before the job runs (its JOB script cds there), when
	// the stager may reach it; a failure matters only if a file is to be staged there.
	if dd.jd != nil {
		if err := dd.jd.create(ctx); err != nil && uses {
			return s.finishIn(ctx, st.JobID, nil, fmt.Errorf("making the job's directory %s: %w", dd.jdPath, err))
		}
	}
	if st.Status == events.StatusIncarnated && len(items) > 0 {
		if st, err = s.begin(ctx, st, items); err != nil || st.Status != events.StatusStagingIn {
			return err
		}
	}
	r := run{s: s, jobID: st.JobID, status: st.Status, dirs: dd, stopOnFailure: true, rec: &recorder{st: st}, who: scopeOf(st)}
	failures, err := r.execute(ctx, st, items)
	if errors.Is(err, errMovedOn) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("staging in job %s: %w", st.JobID, err)
	}
	return s.finishIn(ctx, st.JobID, failures, nil)
}

// begin records the stage-in plan (or a cancellation that came first).
func (s *stager) begin(ctx context.Context, st events.State, items []item) (events.State, error) {
	return s.deps.Store.DecideLatest(ctx, st.JobID, func(st events.State) ([]events.Event, error) {
		if st.Status != events.StatusIncarnated {
			return nil, nil
		}
		if st.CancelRequested {
			return one(st.JobID, events.Cancelled, "", s.deps.Now(), events.EndData{Reason: "cancelled before it was queued"})
		}
		return one(st.JobID, events.StagingIn, "", s.deps.Now(), events.StagingData{
			Direction: DirIn, Files: files(items), WorkDir: st.Incarnation.WorkDir})
	})
}

// finishIn queues the job on its cluster, or fails it naming the file that did not come
// (or why its directory could not be used).
func (s *stager) finishIn(ctx context.Context, jobID string, failures []failure, refused error) error {
	_, err := s.deps.Store.DecideLatest(ctx, jobID, func(st events.State) ([]events.Event, error) {
		now := s.deps.Now()
		switch {
		case st.Status != events.StatusIncarnated && st.Status != events.StatusStagingIn:
			return nil, nil
		case refused != nil:
			return one(st.JobID, events.Failed, "", now, events.EndData{Reason: "stage-in refused: " + refused.Error()})
		case len(failures) > 0:
			f := failures[0]
			return one(st.JobID, events.Failed, "", now, events.EndData{Reason: fmt.Sprintf(
				"stage-in of %s from %s failed: %s", f.it.to, f.it.from, f.last)})
		case st.CancelRequested:
			return one(st.JobID, events.Cancelled, "", now, events.EndData{Reason: "cancelled before it was queued"})
		}
		return one(st.JobID, events.Queued, st.Cluster, now, events.QueuedData{Cluster: st.Cluster})
	})
	return err
}

func one(jobID string, name events.Name, route string, at time.Time, payload any) ([]events.Event, error) {
	e, err := events.New(jobID, name, route, at, payload)
	return []events.Event{e}, err
}

// stageOut moves the job's outputs as its description asks, cleans up, and records
// the outcome; the watcher then ends the job.
func (s *stager) stageOut(ctx context.Context, d events.Delivery) error {
	st, err := s.deps.Store.StateAt(ctx, d.Event)
	if err != nil || st.Status != events.StatusStagingOut || st.StagedOut != nil {
		return err
	}
	job, err := s.targetJob(ctx, st)
	if err != nil {
		return err
	}
	success := st.ExitCode != nil && *st.ExitCode == 0
	items := planOut(job, s.cfg.MaxTransferAttempts, success, s.plugins.schemes())
	if len(items) == 0 && len(job.Cleanup) == 0 {
		return s.finishOut(ctx, st.JobID, events.StagedOutData{OK: true})
	}
	want := []string{AccessRead}
	if len(job.Cleanup) > 0 {
		want = append(want, AccessWrite)
	}
	dd, err := s.openDirs(ctx, st, job, usesJobDir(items) || len(job.Cleanup) > 0, want...)
	if errors.Is(err, ErrJobDir) {
		return s.finishOut(ctx, st.JobID, events.StagedOutData{Reason: "stage-out refused: " + err.Error()})
	}
	if err != nil {
		return err
	}
	defer dd.Close()
	if err := dd.wd.create(ctx); err != nil {
		return err
	}
	r := run{s: s, jobID: st.JobID, status: events.StatusStagingOut, dirs: dd, rec: &recorder{st: st}, who: scopeOf(st)}
	failures, err := r.execute(ctx, st, items)
	if errors.Is(err, errMovedOn) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("staging out job %s: %w", st.JobID, err)
	}
	out := events.StagedOutData{Files: len(items) - len(failures)}
	for _, f := range failures {
		out.Failed = append(out.Failed, f.String())
	}
	for _, c := range job.Cleanup {
		if err := s.cleanup(ctx, st, dd, c); err != nil {
			out.Failed = append(out.Failed, fmt.Sprintf("cleanup %s: %v", c, err))
			continue
		}
		out.Cleaned = append(out.Cleaned, c)
	}
	out.OK = len(out.Failed) == 0
	if !out.OK {
		out.Reason = fmt.Sprintf("%d of %d stage-out and cleanup entries failed: %s",
			len(out.Failed), len(items)+len(job.Cleanup), strings.Join(out.Failed, "; "))
	}
	return s.finishOut(ctx, st.JobID, out)
}

// finishOut records stage-out's outcome once.
func (s *stager) finishOut(ctx context.Context, jobID string, out events.StagedOutData) error {
	_, err := s.deps.Store.DecideLatest(ctx, jobID, func(st events.State) ([]events.Event, error) {
		if st.Status != events.StatusStagingOut || st.StagedOut != nil {
			return nil, nil
		}
		return one(st.JobID, events.StagedOut, st.Cluster, s.deps.Now(), out)
	})
	return err
}

func (s *stager) exhausted(ctx context.Context, d events.Delivery, cause error) {
	_, err := s.deps.Store.Decide(ctx, d.Event.JobID, func(st events.State) ([]events.Event, error) {
		now := s.deps.Now()
		switch {
		case st.Status == events.StatusStagingOut && st.StagedOut == nil:
			return one(st.JobID, events.StagedOut, st.Cluster, now, events.StagedOutData{
				Reason: "stage-out failed on every delivery: " + cause.Error()})
		case st.Status.Terminal(), st.Status == events.StatusStagingOut:
			return nil, nil
		}
		return one(st.JobID, events.Failed, "", now, events.EndData{
			ExitCode: st.ExitCode, Reason: "staging failed on every delivery: " + cause.Error()})
	})
	if err != nil {
		s.deps.Logger.Error("recording exhausted staging", "job", d.Event.JobID, "err", err)
	}
}
