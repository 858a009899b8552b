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

// DropPipeAcks makes s's own bulk publishing lose the acknowledgement of every append
// for which drop is true (its index in its window), as a network would: the append is
// stored and the store sees no answer.
func DropPipeAcks(s *Store, drop func(i int) bool) {
	s.pipe.mu.Lock()
	s.pipe.fault = func(i int) (bool, bool) { return false, drop(i) }
	s.pipe.mu.Unlock()
}

// ReadPubAck is what the store's own bulk publishing reads an acknowledgement as.
var ReadPubAck = readPubAck
