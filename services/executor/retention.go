package executor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/pkg/target"
	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/sync/errgroup"
)

// Retention: an executor of a cluster with a retention removes the working directory of
// each of its jobs that ended longer ago than that, and records it in the job's log as
// directory_deleted. The schedule is kept in the KV bucket RetentionBucket, one key per
// ended attempt (<cluster>.<job>.<attempt>), written by a durable consumer that
// acknowledges each event at once: the events that end a job on the cluster (staged_out
// routed to it, cancelled by its ABORT) and the unrouted ends (failed, cancelled) of
// jobs placed on it. Every executor process of the cluster watches the bucket into
// memory (rebuilt by the watch on restart) and sweeps it, reading a job once to learn when
// its directory is due and not again before then; a due key is claimed with a
// compare-and-set on its revision, so one process runs DELETE, and the conditional
// append of directory_deleted on the job's chain is the last word should a stale claim
// be taken over. Nothing waits in JetStream for days, and no sweep reads the log beyond
// the jobs that are due.

// RetentionBucket is the KV bucket of ended attempts waiting for their directory's removal.
const RetentionBucket = "gridwire-retention"

// dueEntry is one key of the bucket.
type dueEntry struct {
	Attempt   int       `json:"attempt"`
	ClaimedBy string    `json:"claimed_by,omitempty"`
	ClaimedAt time.Time `json:"claimed_at,omitzero"`
	rev       uint64
	// at is when the attempt's directory is due, once a sweep has read the job: later
	// sweeps skip it without reading the job until then.
	at time.Time
}

type sweeper struct {
	x     *executor
	after time.Duration
	root  string
	rm    Remover
	kv    jetstream.KeyValue

	mu   sync.Mutex
	due  map[string]dueEntry // by key
	wake chan struct{}
}

func retentionDefaults(c Config) Config {
	if c.SweepEvery <= 0 {
		c.SweepEvery = time.Minute
	}
	if c.RemoveTries <= 0 {
		c.RemoveTries = 3
	}
	if c.RemoveBackoff <= 0 {
		c.RemoveBackoff = 2 * time.Second
	}
	if c.ClaimStale <= 0 {
		c.ClaimStale = 10 * time.Minute
	}
	return c
}

// dueKey is the bucket key of one attempt of a job on the cluster.
func dueKey(cluster, jobID string, attempt int) string {
	return cluster + "." + jobID + "." + strconv.Itoa(attempt)
}

// runRetention runs the schedule's consumer, its watch and the sweeps until ctx ends.
func (x *executor) runRetention(ctx context.Context, rm Remover) error {
	kv, err := retentionBucket(ctx, x.deps.JS)
	if err != nil {
		return err
	}
	s := &sweeper{x: x, after: x.cfg.Cluster.Retention.After, root: x.cfg.WorkRoot, rm: rm, kv: kv,
		due: map[string]dueEntry{}, wake: make(chan struct{}, 1)}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return s.watch(gctx) })
	g.Go(func() error { return s.loop(gctx) })
	cl := x.cfg.Cluster.Name
	g.Go(func() error {
		return events.Consume(gctx, x.deps.JS, events.ConsumerSpec{
			Durable: "executor-retention-" + cl,
			Filters: []string{events.TypeFilter(events.StagedOut, cl), events.TypeFilter(events.Cancelled, cl),
				events.TypeFilter(events.Failed, events.NoRoute), events.TypeFilter(events.Cancelled, events.NoRoute)},
			Workers: 4, Batch: 16, MaxDeliver: x.cfg.MaxDeliver, AckWait: x.cfg.AckWait, Logger: x.log,
		}, s.schedule)
	})
	return g.Wait()
}

// retentionBucket opens the schedule, creating it with the log's replicas.
func retentionBucket(ctx context.Context, js jetstream.JetStream) (jetstream.KeyValue, error) {
	kv, err := events.Ensure(ctx, func(ctx context.Context) (jetstream.KeyValue, error) {
		replicas, err := events.Replicas(ctx, js)
		if err != nil {
			return nil, err
		}
		return js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: RetentionBucket,
			Description: "ended job attempts whose working directory awaits removal, by cluster",
			Storage:     jetstream.FileStorage, Replicas: replicas})
	})
	if err != nil {
		return nil, fmt.Errorf("executor: retention bucket: %w", err)
	}
	return kv, nil
}

// schedule records the attempt an ending event belongs to, when it ran on this cluster.
func (s *sweeper) schedule(ctx context.Context, d events.Delivery) error {
	st, err := s.x.deps.Store.StateAt(ctx, d.Event)
	if err != nil {
		return err
	}
	if st.Cluster != s.x.cfg.Cluster.Name || st.Incarnation == nil || st.Incarnation.WorkDir == "" {
		return nil // another cluster's job, or one never placed: no directory here
	}
	b, _ := json.Marshal(dueEntry{Attempt: st.Attempt()})
	_, err = s.kv.Create(ctx, dueKey(st.Cluster, st.JobID, st.Attempt()), b)
	if errors.Is(err, jetstream.ErrKeyExists) {
		return nil // scheduled by an earlier event of the attempt
	}
	return err
}

// watch keeps s.due equal to the cluster's keys in the bucket.
func (s *sweeper) watch(ctx context.Context) error {
	w, err := s.kv.Watch(ctx, s.x.cfg.Cluster.Name+".>")
	if err != nil {
		return fmt.Errorf("executor: watching the retention bucket: %w", err)
	}
	defer func() { _ = w.Stop() }()
	for {
		select {
		case <-ctx.Done():
			return nil
		case u, ok := <-w.Updates():
			if !ok {
				return nil
			}
			if u != nil {
				s.update(u)
			}
			s.nudge()
		}
	}
}

func (s *sweeper) update(u jetstream.KeyValueEntry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var e dueEntry
	if u.Operation() != jetstream.KeyValuePut || json.Unmarshal(u.Value(), &e) != nil {
		delete(s.due, u.Key())
		return
	}
	e.rev = u.Revision()
	s.due[u.Key()] = e
}

func (s *sweeper) nudge() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// loop sweeps at start, whenever the schedule changes, and every SweepEvery (sooner
// while an attempt waits for its terminal event).
func (s *sweeper) loop(ctx context.Context) error {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case <-s.wake:
		}
		soon := s.sweep(ctx)
		next := s.x.cfg.SweepEvery
		if soon {
			next = min(next, time.Second)
		}
		t.Reset(next)
	}
}

// sweep removes the directories that are due, four at a time. It reports whether an
// attempt's end is still to be recorded (its stage-out seen, its terminal event not yet).
func (s *sweeper) sweep(ctx context.Context) (soon bool) {
	now := s.x.deps.Now()
	type item struct {
		key string
		e   dueEntry
	}
	var items []item
	s.mu.Lock()
	for k, e := range s.due {
		if !now.Before(e.at) {
			items = append(items, item{k, e})
		}
	}
	s.mu.Unlock()
	var mu sync.Mutex
	g := errgroup.Group{}
	g.SetLimit(4)
	for _, it := range items {
		key, e := it.key, it.e
		g.Go(func() error {
			waiting, err := s.one(ctx, key, e)
			if err != nil && ctx.Err() == nil {
				s.x.log.Warn("retention", "key", key, "err", err)
			}
			mu.Lock()
			soon = soon || waiting
			mu.Unlock()
			return nil
		})
	}
	_ = g.Wait()
	return soon
}

// one handles one scheduled attempt: dropped when its directory is recorded deleted or a
// later attempt replaced it, kept until due, else claimed, removed and recorded.
func (s *sweeper) one(ctx context.Context, key string, e dueEntry) (waiting bool, err error) {
	jobID := strings.Split(key, ".")[1]
	st, err := s.x.deps.Store.State(ctx, jobID)
	if err != nil {
		return false, err
	}
	switch {
	case st.Attempt() > e.Attempt, st.Attempt() == e.Attempt && st.DirectoryDeleted != nil:
		// Done, or a restarted job: its last attempt removes every attempt's directory.
		return false, s.drop(ctx, key, e)
	case !st.Status.Terminal():
		return true, nil
	case st.Restartable():
		return true, nil // the watcher runs it again
	case s.x.deps.Now().Before(st.EndedAt.Add(s.after)):
		s.mu.Lock()
		if cur, ok := s.due[key]; ok && cur.rev == e.rev {
			cur.at = st.EndedAt.Add(s.after)
			s.due[key] = cur
		}
		s.mu.Unlock()
		return false, nil
	case e.ClaimedBy != "" && s.x.deps.Now().Sub(e.ClaimedAt) < s.x.cfg.ClaimStale:
		return false, nil // another process is removing it
	}
	claim, _ := json.Marshal(dueEntry{Attempt: e.Attempt, ClaimedBy: s.x.cfg.ID, ClaimedAt: s.x.deps.Now()})
	rev, err := s.kv.Update(ctx, key, claim, e.rev)
	if err != nil {
		return false, nil // another process claimed it first (or the key is gone)
	}
	fact := s.remove(ctx, st)
	if _, err := s.x.deps.Store.DecideFrom(ctx, st, func(now events.State) ([]events.Event, error) {
		if !now.Status.Terminal() || now.DirectoryDeleted != nil || now.Attempt() != e.Attempt {
			return nil, nil // recorded by a process whose stale claim this one took over
		}
		ev, err := events.New(now.JobID, events.DirectoryDeleted, s.x.cfg.Cluster.Name, s.x.deps.Now(), fact)
		return []events.Event{ev}, err
	}); err != nil {
		return false, fmt.Errorf("recording directory_deleted of job %s: %w", jobID, err)
	}
	s.x.log.Info("directory removed", "job", jobID, "attempt", e.Attempt, "ok", fact.OK, "script", fact.Script)
	e.rev = rev
	return false, s.drop(ctx, key, e)
}

func (s *sweeper) drop(ctx context.Context, key string, e dueEntry) error {
	err := s.kv.Delete(ctx, key, jetstream.LastRevision(e.rev))
	if err == nil {
		s.mu.Lock()
		delete(s.due, key)
		s.mu.Unlock()
	}
	return err
}

// remove runs the removal of the attempt's directories (its own, and those of earlier
// attempts on this cluster), each up to RemoveTries times, and says how it went.
func (s *sweeper) remove(ctx context.Context, st events.State) events.DirectoryDeletedData {
	fact := events.DirectoryDeletedData{OK: true, Host: st.Host, Executor: s.x.cfg.ID}
	type dir struct{ path, host string }
	dirs := []dir{{st.Incarnation.WorkDir, st.Host}}
	for _, a := range st.Attempts {
		if a.Cluster == s.x.cfg.Cluster.Name && a.WorkDir != "" {
			dirs = append(dirs, dir{a.WorkDir, a.Host})
		}
	}
	for _, d := range dirs {
		fact.Paths = append(fact.Paths, d.path)
		if err := jobDir(s.root, st.JobID, d.path); err != nil {
			fact.OK, fact.ExitCode, fact.Reason, fact.Script = false, -1, err.Error(), "refused"
			return fact
		}
		at := st
		at.Host = d.host
		out, script, tries, err := s.tries(ctx, at, d.path)
		fact.Script, fact.Tries, fact.ExitCode = script, fact.Tries+tries, out.ExitCode
		fact.Output = target.Excerpt(append(out.Stdout, out.Stderr...), 500)
		if err != nil || !out.OK() {
			fact.OK = false
			fact.Reason = fmt.Sprintf("removing %s after %d tries: ", d.path, tries)
			if err != nil {
				fact.ExitCode, fact.Reason = -1, fact.Reason+err.Error()
			} else {
				fact.Reason += out.Describe()
			}
			return fact
		}
	}
	return fact
}

// tries runs the removal of one directory until it succeeds or RemoveTries ran, waiting
// a little longer after each failure.
func (s *sweeper) tries(ctx context.Context, st events.State, dir string) (target.Output, string, int, error) {
	var (
		out    target.Output
		script string
		err    error
	)
	wait := s.x.cfg.RemoveBackoff
	for n := 1; ; n++ {
		out, script, err = s.rm.Remove(ctx, st, dir)
		if err == nil && out.OK() || n >= s.x.cfg.RemoveTries || ctx.Err() != nil {
			return out, script, n, err
		}
		select {
		case <-ctx.Done():
			return out, script, n, ctx.Err()
		case <-time.After(wait):
		}
		wait *= 2
	}
}
