package watcher

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/gridwire/gridwire/events"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// WatchBucket is the KV bucket holding the jobs each cluster's watcher follows, keyed
// <cluster>.<jobID>. It is a projection of the log (started jobs not yet exited) and can
// be rebuilt from it.
const WatchBucket = "gridwire-watch"

// Watched is one followed job.
type Watched struct {
	JobID    string    `json:"job"`
	Cluster  string    `json:"cluster"`
	NativeID string    `json:"native_id"`
	WorkDir  string    `json:"work_dir"`
	Since    time.Time `json:"since"`
	// StartBefore is the job's start-before deadline: still queued after it, the job is
	// cancelled in the queue (events.CancelStartDeadline).
	StartBefore *time.Time `json:"start_before,omitempty"`

	goneSince time.Time // first poll that found it gone without an exit status
	unknown   bool      // status_unknown recorded and not yet cleared
	deadline  bool      // the start deadline's cancel request is recorded
}

// Observation is what a probe learned of one job.
type Observation struct {
	Exited      bool
	ExitCode    int
	Reason      string        // why the job script ended the program itself, when it did
	Gone        bool          // neither running nor with an exit status
	State       events.Status // canonical, when the target reports one
	NativeState string
}

// Prober asks a target about many jobs at once: one call per poll, not one per job.
type Prober interface {
	Probe(ctx context.Context, jobs []Watched) (map[string]Observation, error)
}

// watchBucket opens the watch list, creating it with the log's replicas; a cluster in
// the middle of a fault is waited for (events.Ensure).
func watchBucket(ctx context.Context, js jetstream.JetStream) (jetstream.KeyValue, error) {
	kv, err := events.Ensure(ctx, func(ctx context.Context) (jetstream.KeyValue, error) {
		replicas, err := events.Replicas(ctx, js)
		if err != nil {
			return nil, err
		}
		return js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
			Bucket: WatchBucket, Description: "jobs followed by watchers, by cluster", Storage: jetstream.FileStorage,
			Replicas: replicas,
		})
	})
	if err != nil {
		return nil, fmt.Errorf("watcher: watch bucket: %w", err)
	}
	return kv, nil
}

type follower struct {
	cfg     Config
	deps    Deps
	cluster string
	kv      jetstream.KeyValue
	prober  Prober
	log     *slog.Logger

	// settle, when set (a fork cluster, whose executor hints every exit), is how long
	// follow waits for a job just started to exit before it puts the job in the watch
	// bucket (see settled).
	settle time.Duration

	mu      sync.Mutex
	jobs    map[string]*Watched
	due     map[string]bool          // jobs to probe at once (hinted, or just followed)
	waiting map[string]chan struct{} // jobs follow is settling, closed by their exit hint
	wake    chan struct{}
}

// forkSettle is a fork cluster's settle: most fork jobs end within milliseconds.
const forkSettle = 100 * time.Millisecond

func newFollower(cfg Config, deps Deps, cluster string, kv jetstream.KeyValue, p Prober) *follower {
	return &follower{cfg: cfg, deps: deps, cluster: cluster, kv: kv, prober: p,
		log: deps.Logger.With("cluster", cluster), jobs: map[string]*Watched{}, due: map[string]bool{},
		waiting: map[string]chan struct{}{}, wake: make(chan struct{}, 1)}
}

func (f *follower) run(ctx context.Context) error {
	// A restore that fails (the server restarting while this watcher starts) is tried
	// again: without it, the jobs followed before would be forgotten.
	for {
		err := f.restore(ctx)
		if err == nil {
			break
		}
		f.log.Warn("restoring followed jobs; trying again", "err", err)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Second):
		}
	}
	if f.deps.Conn != nil {
		sub, err := f.deps.Conn.Subscribe(events.HintSubject("exit", f.cluster), func(m *nats.Msg) { f.hinted(string(m.Data)) })
		if err != nil {
			return err
		}
		defer sub.Unsubscribe()
	}
	errc := make(chan error, 1)
	workers := 32
	if f.settle > 0 {
		workers = 128 // a worker may wait out settle on a job that runs on
	}
	go func() {
		errc <- events.Consume(ctx, f.deps.JS, events.ConsumerSpec{
			Durable: "watcher-" + f.cluster, Filters: []string{events.TypeFilter(events.Started, f.cluster)},
			Workers: workers, Logger: f.log,
		}, f.follow)
	}()
	f.pollLoop(ctx)
	return <-errc
}

// restore reloads the followed jobs after a restart.
func (f *follower) restore(ctx context.Context) error {
	keys, err := f.kv.ListKeysFiltered(ctx, f.cluster+".>")
	if err != nil {
		return fmt.Errorf("watcher: listing followed jobs: %w", err)
	}
	for k := range keys.Keys() {
		entry, err := f.kv.Get(ctx, k)
		if err != nil {
			continue
		}
		var w Watched
		if json.Unmarshal(entry.Value(), &w) == nil {
			f.jobs[w.JobID] = &w
		}
	}
	return nil
}

// follow records a started job in the watch set; the ack waits for the KV write.
func (f *follower) follow(ctx context.Context, d events.Delivery) error {
	var s events.StartedData
	if err := d.Event.Payload(&s); err != nil {
		return nil
	}
	st, err := f.deps.Store.StateAt(ctx, d.Event)
	if err != nil {
		return err
	}
	if st.Incarnation == nil || st.Status.Terminal() || st.Status == events.StatusStagingOut {
		return nil
	}
	w := &Watched{JobID: st.JobID, Cluster: f.cluster, NativeID: s.NativeID, WorkDir: st.Incarnation.WorkDir, Since: d.Event.Time}
	if st.Job != nil {
		w.StartBefore = st.Job.StartBefore
	}
	if done, err := f.settled(ctx, w); done || err != nil {
		return err
	}
	b, _ := json.Marshal(w)
	if _, err := f.kv.Put(ctx, f.cluster+"."+w.JobID, b); err != nil {
		return err
	}
	f.mu.Lock()
	if _, ok := f.jobs[w.JobID]; !ok {
		f.jobs[w.JobID] = w
	}
	f.mu.Unlock()
	f.poke(w.JobID) // it may have ended before we followed it
	return nil
}

// settled lets a job on a fork cluster that ends soon after it started skip the watch
// bucket: it waits up to settle for the job's exit (its exit status file, looked at
// first, then again at the executor's exit hint or at the end of the wait) and records
// it. done says the exit is in the log; the Started delivery is acked only then, so a
// watcher that dies before it is redelivered and the job followed again. A job still
// running is followed as any other: put in the bucket, then probed.
func (f *follower) settled(ctx context.Context, w *Watched) (done bool, err error) {
	if f.settle <= 0 {
		return false, nil
	}
	hint := make(chan struct{})
	f.mu.Lock()
	_, followed := f.jobs[w.JobID]
	if !followed {
		f.waiting[w.JobID] = hint
	}
	f.mu.Unlock()
	if followed {
		// In the bucket already (restored after a restart that cut an earlier follow
		// short): the poll that sees it end also removes its entry.
		return false, nil
	}
	defer func() {
		f.mu.Lock()
		if f.waiting[w.JobID] == hint {
			delete(f.waiting, w.JobID)
		}
		f.mu.Unlock()
	}()
	code, reason, ok := exitStatus(w.WorkDir)
	if !ok {
		t := time.NewTimer(f.settle)
		select {
		case <-hint:
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
		code, reason, ok = exitStatus(w.WorkDir)
	}
	if !ok {
		return false, nil
	}
	if err := f.recordExit(ctx, w.JobID, events.ExitedData{ExitCode: code, Reason: reason}); err != nil {
		return false, err
	}
	return true, nil
}

// hinted wakes a follow settling the job, and probes the job if it is followed.
func (f *follower) hinted(jobID string) {
	f.mu.Lock()
	if c, ok := f.waiting[jobID]; ok {
		delete(f.waiting, jobID)
		close(c)
	}
	f.mu.Unlock()
	f.poke(jobID)
}

// poke asks for one job to be probed soon, ahead of the next full round.
func (f *follower) poke(jobID string) {
	f.mu.Lock()
	f.due[jobID] = true
	f.mu.Unlock()
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// pollLoop probes the followed jobs. A full round probes all of them in one batch; its
// interval halves back to PollMin whenever something happened and doubles toward
// PollMax while nothing does. Between rounds, hinted jobs are probed on their own.
func (f *follower) pollLoop(ctx context.Context) {
	interval := f.cfg.PollMin
	timer := time.NewTimer(interval)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-f.wake:
			f.pollOnce(ctx, f.takeDue())
			continue
		case <-timer.C:
		}
		if f.pollOnce(ctx, f.snapshot()) {
			interval = f.cfg.PollMin
		} else {
			interval = min(interval*2, f.cfg.PollMax)
		}
		timer.Reset(interval)
	}
}

// snapshot is every followed job.
func (f *follower) snapshot() []Watched {
	f.mu.Lock()
	defer f.mu.Unlock()
	clear(f.due)
	batch := make([]Watched, 0, len(f.jobs))
	for _, w := range f.jobs {
		batch = append(batch, *w)
	}
	return batch
}

// takeDue is the followed jobs that were hinted since the last look.
func (f *follower) takeDue() []Watched {
	f.mu.Lock()
	defer f.mu.Unlock()
	batch := make([]Watched, 0, len(f.due))
	for id := range f.due {
		if w, ok := f.jobs[id]; ok {
			batch = append(batch, *w)
		}
	}
	clear(f.due)
	return batch
}

// pollOnce probes a batch and reports whether anything changed.
func (f *follower) pollOnce(ctx context.Context, batch []Watched) bool {
	if len(batch) == 0 {
		return false
	}
	obs, err := f.prober.Probe(ctx, batch)
	if err != nil {
		f.markUnknown(ctx, batch, err)
		return false
	}
	changed := false
	for _, w := range batch {
		o, ok := obs[w.JobID]
		if !ok {
			continue
		}
		if f.apply(ctx, w, o) {
			changed = true
		}
	}
	return changed
}

// apply records one observation; it reports whether the job left the watch set.
func (f *follower) apply(ctx context.Context, w Watched, o Observation) bool {
	now := f.deps.Now()
	if w.unknown {
		f.record(ctx, w.JobID, events.StatusKnown, events.Note{Reason: "the target answers again"})
		f.update(w.JobID, func(x *Watched) { x.unknown = false })
	}
	switch {
	case o.Exited:
		return f.exit(ctx, w, events.ExitedData{ExitCode: o.ExitCode, NativeState: o.NativeState, Reason: o.Reason})
	case o.Gone:
		if w.goneSince.IsZero() {
			f.update(w.JobID, func(x *Watched) { x.goneSince = now })
			return false
		}
		if now.Sub(w.goneSince) < f.cfg.VanishGrace {
			return false
		}
		return f.exit(ctx, w, events.ExitedData{ExitCode: -1, NativeState: o.NativeState,
			Reason: fmt.Sprintf("the job vanished from %s without an exit status", f.cluster)})
	default:
		f.update(w.JobID, func(x *Watched) { x.goneSince = time.Time{} })
		if o.State != "" {
			f.statusChange(ctx, w.JobID, o)
		}
		if o.State == events.StatusQueued && w.StartBefore != nil && now.After(*w.StartBefore) && !w.deadline {
			f.startDeadline(ctx, w)
		}
		return false
	}
}

func (f *follower) exit(ctx context.Context, w Watched, d events.ExitedData) bool {
	if err := f.recordExit(ctx, w.JobID, d); err != nil {
		f.log.Error("recording exit", "job", w.JobID, "err", err)
		return false
	}
	f.forget(ctx, w.JobID)
	return true
}

// recordExit appends the job's exited event unless the job has moved past running.
func (f *follower) recordExit(ctx context.Context, jobID string, d events.ExitedData) error {
	_, err := f.deps.Store.DecideLatest(ctx, jobID, func(st events.State) ([]events.Event, error) {
		if st.Status != events.StatusQueued && st.Status != events.StatusRunning && st.Status != events.StatusHeld {
			return nil, nil
		}
		e, err := events.New(st.JobID, events.Exited, f.cluster, f.deps.Now(), d)
		return []events.Event{e}, err
	})
	return err
}

func (f *follower) statusChange(ctx context.Context, jobID string, o Observation) {
	_, err := f.deps.Store.DecideLatest(ctx, jobID, func(st events.State) ([]events.Event, error) {
		if st.Status == o.State && st.NativeState == o.NativeState {
			return nil, nil
		}
		if st.Status != events.StatusQueued && st.Status != events.StatusRunning && st.Status != events.StatusHeld {
			return nil, nil
		}
		// A poll answered just before a HOLD took effect still says "pending": only a
		// job seen running has left HELD behind gridwire's back; RESUME does the rest.
		if st.Status == events.StatusHeld && o.State == events.StatusQueued {
			return nil, nil
		}
		e, err := events.New(jobID, events.StatusChanged, f.cluster, f.deps.Now(),
			events.StatusData{State: o.State, NativeState: o.NativeState})
		return []events.Event{e}, err
	})
	if err != nil && !errors.Is(err, events.ErrIllegalTransition) {
		f.log.Error("recording status", "job", jobID, "err", err)
	}
}

// startDeadline asks, once, for a job still queued past its start-before deadline to be
// taken out of the queue; the executor's ABORT then ends it FAILED with this reason.
func (f *follower) startDeadline(ctx context.Context, w Watched) {
	why := "jobStartBefore: the job had not started by " + w.StartBefore.UTC().Format(time.RFC3339) +
		", so it was cancelled in " + f.cluster + "'s queue"
	_, err := f.deps.Store.DecideLatest(ctx, w.JobID, func(st events.State) ([]events.Event, error) {
		if st.Status != events.StatusQueued || st.CancelRequested {
			return nil, nil
		}
		e, err := events.New(w.JobID, events.CancelRequested, f.cluster, f.deps.Now(),
			events.Note{Reason: why, Action: events.CancelStartDeadline})
		return []events.Event{e}, err
	})
	if err != nil {
		f.log.Error("asking to cancel a job past its start deadline", "job", w.JobID, "err", err)
		return
	}
	f.update(w.JobID, func(x *Watched) { x.deadline = true })
}

// markUnknown records status_unknown once per job per outage.
func (f *follower) markUnknown(ctx context.Context, batch []Watched, cause error) {
	f.log.Warn("probe failed", "jobs", len(batch), "err", cause)
	for _, w := range batch {
		if w.unknown {
			continue
		}
		if f.record(ctx, w.JobID, events.StatusUnknown, events.Note{Reason: cause.Error()}) {
			f.update(w.JobID, func(x *Watched) { x.unknown = true })
		}
	}
}

func (f *follower) record(ctx context.Context, jobID string, name events.Name, n events.Note) bool {
	_, err := f.deps.Store.DecideLatest(ctx, jobID, func(st events.State) ([]events.Event, error) {
		if st.Status.Terminal() || (name == events.StatusUnknown) == st.StatusUnknown {
			return nil, nil
		}
		e, err := events.New(jobID, name, f.cluster, f.deps.Now(), n)
		return []events.Event{e}, err
	})
	if err != nil {
		f.log.Error("recording "+string(name), "job", jobID, "err", err)
	}
	return err == nil
}

func (f *follower) update(jobID string, fn func(*Watched)) {
	f.mu.Lock()
	if w, ok := f.jobs[jobID]; ok {
		fn(w)
	}
	f.mu.Unlock()
}

func (f *follower) forget(ctx context.Context, jobID string) {
	f.mu.Lock()
	delete(f.jobs, jobID)
	f.mu.Unlock()
	if err := f.kv.Purge(ctx, f.cluster+"."+jobID); err != nil {
		f.log.Warn("forgetting followed job", "job", jobID, "err", err)
	}
}
