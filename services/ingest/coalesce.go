package ingest

import (
	"context"
	"errors"
	"time"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/pkg/groupcommit"
)

// createQueue stores the first events of concurrent single-job submissions together:
// the first submission to arrive stores its event at once, alone (events.Store.CreateAll
// of one); those that arrive while it is being stored queue, and the first of them
// stores the whole queue with one CreateAll, pipelined and signed in batches, while the
// next ones queue behind it. No submission waits for a batch to fill, and every one is
// answered only once its own event is acknowledged (or has failed), as Create answers
// it: each append is still conditional on its job having no events. One job a request
// from many clients then costs about what a bulk submission does a job, instead of a
// round trip, an acknowledgement and a signature of its own.
type createQueue struct {
	q groupcommit.Queue[*queuedCreate]
}

// queuedCreate is one submission's event, and its outcome once stored.
type queuedCreate struct {
	event events.Event
	err   error
}

// create stores e through bs, with whatever other submissions' events queue with it.
// Each submitter that stores a batch stores one, its own event in it, then hands the
// queue to the first submitter waiting in it, so none is kept storing others' events.
// A caller whose context ends still waits for its event's outcome (a bounded wait: the
// store's own timeouts), so that an event stored is never reported lost; a batch is
// stored under a context that one caller's cancellation does not end.
func (q *createQueue) create(ctx context.Context, bs BulkStore, e events.Event) error {
	me := &queuedCreate{event: e}
	q.q.Do(me, 0, func(batch []*queuedCreate) { q.store(context.WithoutCancel(ctx), bs, batch) })
	return me.err
}

// errNotStored answers the submissions of a batch the store gave no outcome for (it
// panicked).
var errNotStored = errors.New("ingest: the store gave no outcome for this job")

// store appends a batch and answers each of its submissions, every one even when the
// store panics.
func (q *createQueue) store(ctx context.Context, bs BulkStore, batch []*queuedCreate) {
	var errs []error
	defer func() {
		for i, c := range batch {
			c.err = errNotStored
			if i < len(errs) {
				c.err = errs[i]
			}
		}
	}()
	if len(batch) > 1 {
		relaxGCLingering(time.Now()) // submissions arriving together: a burst
	}
	evs := make([]events.Event, len(batch))
	for i, c := range batch {
		evs[i] = c.event
	}
	_, errs = bs.CreateAll(ctx, evs)
}
