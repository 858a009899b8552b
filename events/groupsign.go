package events

import "sync"

// Group signing: the appends of one process that are ready to be signed with the same
// key at the same moment share one batch signature (batchsign.go) instead of one
// ed25519 signature each, as a database's group commit shares one log flush. Nothing
// waits to gather a batch: a caller that finds nobody signing signs its event at once,
// alone, with Sign's plain signature; only callers that arrive while someone is signing
// queue, and when that signature is done the first of them signs every event queued by
// then (up to batchLeaves) with one signature and wakes the rest. So a lone append costs
// what it did, and under load one signature serves as many appends as arrive during
// one signature's time.
//
// What a batch signature vouches for is exactly each member's signing bytes as sealed
// (its chain link included), as a single signature does. A member whose append is then
// refused (a conflict) never reaches the log; its leaf is only a hash inside its
// batch-mates' paths and proves nothing about any stored event. The store seals a
// decision made again after a conflict anew (a new chain link: new signing bytes, a new
// signature), so no stored event carries a signature made for another event.

// signGroup queues the events that come to be signed while one signature is being made.
type signGroup struct {
	mu      sync.Mutex
	busy    bool          // a caller is signing: newcomers queue
	waiting []*signWaiter // in arrival order; the first leads the next batch
}

// signWaiter is one queued event and how its caller is woken.
type signWaiter struct {
	e    *Event
	wake chan bool // true: sign the next batch (this event first); false: signed
}

// signShared sets e's signer and signature as Sign does, sharing a batch signature
// with the events of other callers that are ready to be signed at the same moment.
// e must be complete, as for Sign.
func (k *SigningKey) signShared(e *Event) {
	g := &k.group
	g.mu.Lock()
	if !g.busy {
		g.busy = true
		g.mu.Unlock()
		k.Sign(e)
		g.handOff()
		return
	}
	w := &signWaiter{e: e, wake: make(chan bool, 1)}
	g.waiting = append(g.waiting, w)
	g.mu.Unlock()
	if lead := <-w.wake; !lead {
		return
	}
	batch := g.take()
	k.signWaiters(batch)
	g.handOff()
	for _, o := range batch[1:] {
		o.wake <- false
	}
}

// handOff ends a signature: the first queued caller leads the next batch, or, with
// nobody queued, the next caller signs at once.
func (g *signGroup) handOff() {
	g.mu.Lock()
	if len(g.waiting) == 0 {
		g.busy = false
		g.mu.Unlock()
		return
	}
	next := g.waiting[0]
	g.mu.Unlock()
	next.wake <- true
}

// take removes up to batchLeaves queued callers, the woken leader first.
func (g *signGroup) take() []*signWaiter {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := min(len(g.waiting), batchLeaves)
	batch := make([]*signWaiter, n)
	copy(batch, g.waiting)
	rest := copy(g.waiting, g.waiting[n:])
	clear(g.waiting[rest:])
	g.waiting = g.waiting[:rest]
	return batch
}

// signWaiters signs the batch's events with one signature (one alone: Sign's).
func (k *SigningKey) signWaiters(batch []*signWaiter) {
	if len(batch) == 1 {
		k.Sign(batch[0].e)
		return
	}
	evs := make([]Event, len(batch))
	for i, w := range batch {
		evs[i] = *w.e
	}
	k.signBatch(evs)
	for i, w := range batch {
		w.e.Signer, w.e.Signature = evs[i].Signer, evs[i].Signature
	}
}
