package watcher

import (
	"context"
	"errors"
	"fmt"

	"github.com/gridwire/gridwire/events"
)

// runSessionUpdates carries out a session's topology update (session_updated, appended
// by ingest after the added children's submissions): every child it removes is asked to
// cancel, as that child's own request routed to its cluster, and the session's state is
// decided again over the children it now has (an update that removed every running task
// may end it). Both are idempotent, as the group consumers are.
func runSessionUpdates(ctx context.Context, deps Deps) error {
	return events.Consume(ctx, deps.JS, events.ConsumerSpec{
		Durable: "watcher-session-updates", Filters: []string{events.TypeFilter(events.SessionUpdated, "")},
		Workers: 2, Logger: deps.Logger,
	}, func(ctx context.Context, d events.Delivery) error {
		err := sessionUpdated(ctx, deps, d.Event)
		if errors.Is(err, events.ErrIllegalTransition) {
			deps.Logger.Error("session update refused", "job", d.Event.JobID, "err", err)
			return nil
		}
		return err
	})
}

func sessionUpdated(ctx context.Context, deps Deps, e events.Event) error {
	var d events.SessionUpdateData
	if err := e.Payload(&d); err != nil {
		return err
	}
	note := events.Note{Reason: fmt.Sprintf("removed from session %s by a topology update", e.JobID)}
	req := events.Event{Name: events.CancelRequested, Principal: e.Principal}
	for _, id := range d.Removed {
		if err := requestChild(ctx, deps, id, req, note); err != nil {
			return err
		}
	}
	return decideGroup(ctx, deps, e.JobID, events.State{})
}
