package events

import "time"

// SignShared is what a signing store's single append signs with, for tests and
// benchmarks outside the package.
func SignShared(k *SigningKey, e *Event) { k.signShared(e) }

// HoldSigning makes k's signer busy, as while an append is being signed, so the events
// that come to be signed with k queue. release waits until n of them are queued (or
// until done is closed: the callers finished without queuing) and then ends the held
// signature: the queued events are signed together.
func HoldSigning(k *SigningKey) (release func(n int, done <-chan struct{})) {
	end := k.group.Hold()
	return func(n int, done <-chan struct{}) {
		for queued := 0; queued < n; {
			select {
			case <-done:
				queued = n
			case <-time.After(time.Millisecond):
				queued = k.group.Waiting()
			}
		}
		end()
	}
}
