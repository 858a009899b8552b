package events

import (
	"context"
	"fmt"
	"time"
)

// RetryTransient runs try, and runs it again while it fails because a server did not
// answer (Transient: one restarting, a cluster electing a leader), waiting 250 ms before
// the second try and twice as long before each next one, up to 5 s; retrying is told of
// each failure and the wait before each new try. It returns try's result once that is
// nil or another error. With patience above 0 it gives up when the next try would start
// past patience, with the last error and how many tries it made over how long; with 0 it
// keeps trying. stopped says ctx ended during a wait (err is then ctx's error): a service
// starting up takes that for a clean stop.
//
// Services ask again while they open their consumers and buckets, and the audit while it
// reads the log and its views.
func RetryTransient(ctx context.Context, patience time.Duration, retrying func(wait time.Duration, err error), try func() error) (stopped bool, err error) {
	start := time.Now()
	wait := 250 * time.Millisecond
	for tries := 1; ; tries++ {
		err := try()
		if err == nil || !Transient(err) {
			return false, err
		}
		if patience > 0 && time.Since(start)+wait > patience {
			return false, fmt.Errorf("%w (the server did not answer in %d tries over %s)", err, tries, time.Since(start).Round(time.Second))
		}
		retrying(wait, err)
		select {
		case <-ctx.Done():
			return true, ctx.Err()
		case <-time.After(wait):
		}
		wait = min(wait*2, 5*time.Second)
	}
}
