package stager

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/gridwire/gridwire/events"
	"golang.org/x/sync/errgroup"
)

// errMovedOn means the job left the staging state while a transfer ran (it was
// cancelled, or another stager finished it): nothing more is to be recorded here.
var errMovedOn = errors.New("stager: the job is no longer staging")

// errRaced means another stager recorded the same attempt first; the message is
// redelivered and the next look at the records decides.
var errRaced = errors.New("stager: another stager recorded this attempt")

// failure is an item that used its budget.
type failure struct {
	it   item
	last string // the last attempt's error
}

func (f failure) String() string { return fmt.Sprintf("%s (%s): %s", f.it.to, f.it.from, f.last) }

// run is one pass over a job's plan.
type run struct {
	s      *stager
	jobID  string
	status events.Status // the state the job must be in for attempts to be recorded
	dirs   dirs          // the job's working directory and its own directory
	// stopOnFailure ends the pass at the first exhausted item (stage-in: the job fails).
	stopOnFailure bool
	rec           *recorder
	who           scope // whose files: the job's cluster and submitter
}

// recorder serialises a pass's appends and keeps the state they produced, so each
// attempt is appended without reloading the job's history (and without the pass's own
// transfers conflicting with each other).
type recorder struct {
	mu sync.Mutex
	st events.State
}

// execute runs every item not yet done, up to the configured number at once, and
// returns the items that exhausted their budgets.
func (r run) execute(ctx context.Context, st events.State, items []item) ([]failure, error) {
	failures := make([]*failure, len(items))
	var todo []int
	for i, it := range items {
		switch p := progressOf(st.Transfers, it.key()); {
		case p.exhausted(it.of):
			failures[i] = &failure{it: it, last: p.last.Error}
		case !p.done:
			todo = append(todo, i)
		}
	}
	if r.stopOnFailure && len(collect(failures)) > 0 {
		return collect(failures), nil
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(r.s.cfg.Parallel)
	for _, i := range todo {
		it, made := items[i], progressOf(st.Transfers, items[i].key()).attempts
		g.Go(func() error {
			f, err := r.item(gctx, it, made)
			failures[i] = f
			if err == nil && f != nil && r.stopOnFailure {
				return errStopPass
			}
			return err
		})
	}
	err := g.Wait()
	if errors.Is(err, errStopPass) {
		err = nil
	}
	return collect(failures), err
}

func collect(fs []*failure) []failure {
	var out []failure
	for _, f := range fs {
		if f != nil {
			out = append(out, *f)
		}
	}
	return out
}

// errStopPass stops the other transfers of a pass after a stage-in file failed.
var errStopPass = errors.New("stager: a file failed")

// item makes attempts after the `made` already recorded until one succeeds or the
// budget is spent. Every attempt is recorded before the next starts.
func (r run) item(ctx context.Context, it item, made int) (*failure, error) {
	for k := made + 1; k <= it.of; k++ {
		start := r.s.deps.Now()
		res, err := r.attempt(ctx, it)
		if err != nil && ctx.Err() != nil {
			// Interrupted (shutdown, or a sibling failed): not an attempt the file made.
			return nil, context.Cause(ctx)
		}
		td := events.TransferData{Direction: it.dir, From: it.from, To: it.to, Attempt: k, Of: it.of,
			Bytes: res.bytes, Duration: r.s.deps.Now().Sub(start), Directory: it.tree, Files: res.files}
		if err == nil {
			td.SHA256 = res.sum
		} else {
			td.Error, td.Permanent = err.Error(), isPermanent(err)
			if k < it.of && !td.Permanent {
				td.Backoff = r.s.backoff(k)
			}
		}
		if err := r.record(ctx, td); err != nil {
			return nil, err
		}
		r.s.deps.Logger.Info("transfer", "job", r.jobID, "direction", it.dir, "file", it.to,
			"attempt", k, "of", it.of, "bytes", td.Bytes, "err", td.Error)
		switch {
		case err == nil:
			return nil, nil
		case td.Permanent || k == it.of:
			return &failure{it: it, last: td.Error}, nil
		}
		if err := sleep(ctx, td.Backoff); err != nil {
			return nil, err
		}
	}
	return &failure{it: it, last: "no attempts allowed"}, nil
}

// attempt makes one copy of an item.
func (r run) attempt(ctx context.Context, it item) (copied, error) {
	if it.err != nil {
		return copied{}, it.err
	}
	var rem endpoint
	var name string
	var err error
	if it.jobFile != "" {
		rem, name = r.dirs.jd, it.jobFile
	} else if rem, name, err = r.s.remoteEndpoint(ctx, it.remote, r.who); err != nil {
		return copied{}, err
	}
	wd := r.dirs.jd
	if it.stdio {
		wd = r.dirs.wd
	}
	c := r.s.copier()
	var local endpoint = wd
	if it.abs {
		want := map[string]string{DirIn: AccessWrite, DirOut: AccessRead}[it.dir]
		if local, err = r.targetEndpoint(want); err != nil {
			return copied{}, err
		}
	}
	if it.dir == DirOut {
		return c.copyItem(ctx, local, it.local, rem, name, it.tree)
	}
	res, err := c.copyItem(ctx, rem, name, local, it.local, it.tree)
	if err == nil && it.exec {
		if x, ok := local.(executableMaker); !ok {
			err = fmt.Errorf("%w: %s cannot be made executable there", ErrTargetPath, it.local)
		} else if err = x.makeExecutable(ctx, it.local); err != nil {
			err = fmt.Errorf("making %s executable: %w", it.local, err)
		}
	}
	return res, err
}

// record appends one attempt, provided the job is still staging and the attempt's
// number follows the records (so a restarted or concurrent stager never duplicates it).
func (r run) record(ctx context.Context, td events.TransferData) error {
	r.rec.mu.Lock()
	defer r.rec.mu.Unlock()
	st, err := r.s.deps.Store.DecideFrom(context.WithoutCancel(ctx), r.rec.st, func(st events.State) ([]events.Event, error) {
		if st.Status != r.status {
			return nil, errMovedOn
		}
		if progressOf(st.Transfers, keyOf(td)).attempts != td.Attempt-1 {
			return nil, errRaced
		}
		now := r.s.deps.Now()
		e, err := events.New(st.JobID, events.Transfer, "", now, td)
		if err != nil || !st.CancelRequested || r.status != events.StatusStagingIn {
			return []events.Event{e}, err
		}
		// A cancel asked for while staging in stops it after this attempt.
		c, err := events.New(st.JobID, events.Cancelled, "", now, events.EndData{Reason: "cancelled while staging in"})
		return []events.Event{e, c}, err
	})
	if err != nil {
		return err
	}
	r.rec.st = st
	if st.Status != r.status {
		return errMovedOn
	}
	return nil
}

// backoff is the wait after failed attempt k: base·2^(k-1), capped, with jitter.
func (s *stager) backoff(k int) time.Duration {
	d := s.cfg.BackoffBase
	for i := 1; i < k && d < s.cfg.BackoffMax; i++ {
		d *= 2
	}
	return s.deps.Jitter(min(d, s.cfg.BackoffMax))
}

func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-t.C:
		return nil
	}
}
