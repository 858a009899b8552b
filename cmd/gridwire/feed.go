package main

import (
	"context"
	"errors"
	"net/url"
	"sync"

	"github.com/gridwire/gridwire/events"
)

// logFeed is one event stream of the whole log, opened before a --follow submission is
// sent, so that a submission of many jobs is followed on one stream rather than on one
// a job (each of those a consumer on the server that looks up its job's events from the
// start of the log). It starts with the first event stored after the server accepted
// it, so every event of the submission comes on it. Events are kept until read, in log
// order.
type logFeed struct {
	cancel context.CancelFunc
	done   chan struct{} // closed when the stream has ended

	mu    sync.Mutex
	queue []events.Event
	wake  chan struct{} // signalled when an event is queued or the stream ends
	err   error         // why the stream ended, once it has
}

// errFeedLost is why a feed ends when its stream broke before it carried any event: a
// new stream could not say where to start without missing some.
var errFeedLost = errors.New("the event stream broke before its first event")

// openLogFeed opens a feed and returns once the server has accepted its stream, or nil
// when it could not (the caller then follows each job on its own).
func openLogFeed(ctx context.Context, c *client) *logFeed {
	ctx, cancel := context.WithCancel(ctx)
	f := &logFeed{cancel: cancel, done: make(chan struct{}), wake: make(chan struct{}, 1)}
	opened := make(chan struct{})
	go f.run(ctx, c, opened)
	select {
	case <-opened:
		return f
	case <-f.done:
	case <-ctx.Done():
	}
	cancel()
	return nil
}

// run reads the stream until it is stopped, resuming after the last event it carried
// when a connection breaks, as client.stream does.
func (f *logFeed) run(ctx context.Context, c *client, accepted chan struct{}) {
	defer close(f.done)
	opened := false   // the server has accepted a connection (streamOnce calls back on this goroutine)
	q := url.Values{} // every event, from the first stored once the stream is open
	wait, failures := c.backoff, 0
	for {
		last, connected, _, err := c.streamOnce(ctx, q, func() {
			if !opened {
				opened = true
				close(accepted)
			}
		}, f.push)
		if ctx.Err() != nil {
			f.end(ctx.Err())
			return
		}
		if last != "" {
			q.Set("after", last)
		}
		switch {
		case !opened:
			// The first connection failed: the caller follows each job on its own, and
			// the submission reports a server it cannot reach.
			f.end(err)
			return
		case q.Get("after") == "":
			f.end(errFeedLost)
			return
		case connected:
			failures, wait = 0, c.backoff
		default:
			if failures++; failures >= max(c.retries, 1) {
				f.end(err)
				return
			}
		}
		if err := sleep(ctx, wait); err != nil {
			f.end(err)
			return
		}
		wait = nextBackoff(wait)
	}
}

func (f *logFeed) push(e events.Event) bool {
	f.mu.Lock()
	f.queue = append(f.queue, e)
	f.mu.Unlock()
	select {
	case f.wake <- struct{}{}:
	default:
	}
	return true
}

func (f *logFeed) end(err error) {
	f.mu.Lock()
	if f.err == nil {
		f.err = err
	}
	f.mu.Unlock()
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// next returns the feed's next event, waiting for it; an error once the stream has
// ended and every event it carried was read.
func (f *logFeed) next(ctx context.Context) (events.Event, error) {
	for {
		f.mu.Lock()
		if len(f.queue) > 0 {
			e := f.queue[0]
			f.queue[0] = events.Event{}
			f.queue = f.queue[1:]
			f.mu.Unlock()
			return e, nil
		}
		err := f.err
		f.mu.Unlock()
		if err != nil {
			return events.Event{}, err
		}
		select {
		case <-f.wake:
		case <-ctx.Done():
			return events.Event{}, ctx.Err()
		}
	}
}

// stop ends the stream (the server deletes its reader) and waits for it.
func (f *logFeed) stop() {
	f.cancel()
	<-f.done
}
