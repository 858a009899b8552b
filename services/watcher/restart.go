package watcher

import (
	"context"
	"errors"
	"fmt"

	"github.com/gridwire/gridwire/events"
)

// runRestarts carries out restart triggers (DDS's TaskCrashed → RestartTask n): after a
// job's attempt crashed (FAILED with a non-zero exit code) and it has restarts left, it
// appends restarted, which begins the next attempt from SUBMITTED; the incarnator places
// it afresh and the rest follows as for any job. The decision is the job's folded
// state alone (events.State.Restartable), so a redelivery finds the restart made. A
// cancel asked of the job's group meanwhile reaches the new attempt at once, since a
// request cannot be made of an attempt that has ended.
func runRestarts(ctx context.Context, deps Deps) error {
	return events.Consume(ctx, deps.JS, events.ConsumerSpec{
		Durable: "watcher-restarts", Filters: []string{events.TypeFilter(events.Failed, "")},
		Workers: 8, Logger: deps.Logger,
	}, func(ctx context.Context, d events.Delivery) error {
		err := restart(ctx, deps, d.Event.JobID)
		if errors.Is(err, events.ErrIllegalTransition) {
			deps.Logger.Error("restart refused", "job", d.Event.JobID, "err", err)
			return nil
		}
		return err
	})
}

func restart(ctx context.Context, deps Deps, id string) error {
	_, err := deps.Store.Decide(ctx, id, func(st events.State) ([]events.Event, error) {
		if !st.Restartable() {
			return nil, nil
		}
		reason := st.Reason
		if reason == "" {
			reason = fmt.Sprintf("exit code %d", *st.ExitCode)
		}
		e, err := events.New(id, events.Restarted, "", deps.Now(), events.RestartedData{
			Attempt: st.Attempt() + 1, Of: st.Job.Restarts + 1, Reason: reason})
		if err != nil {
			return nil, err
		}
		out := []events.Event{e}
		cancelled, err := parentCancelled(ctx, deps, st.Job.Parent)
		if err != nil || !cancelled {
			return out, err
		}
		c, err := events.New(id, events.CancelRequested, "", deps.Now(), events.Note{
			Reason: "the group " + st.Job.Parent + " was asked to cancel before this attempt began"})
		return append(out, c), err
	})
	return err
}

// parentCancelled reports whether the job's parent record was asked to cancel.
func parentCancelled(ctx context.Context, deps Deps, parent string) (bool, error) {
	if parent == "" {
		return false, nil
	}
	p, err := deps.Store.State(ctx, parent)
	if err != nil {
		return false, fmt.Errorf("reading parent %s: %w", parent, err)
	}
	return p.CancelRequested, nil
}
