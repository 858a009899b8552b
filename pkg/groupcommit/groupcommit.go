// Package groupcommit lets concurrent callers share one run of a costly step, as a
// database's group commit shares one log flush among the transactions that commit while
// it is being written.
//
// Nothing waits to gather a batch: a caller that finds no run under way runs the step at
// once with its own item alone. Callers that arrive while a run is under way queue; when
// it ends, the first of them runs the step once for every item queued by then (up to a
// limit) and the others are released with it. So a lone caller pays what it would pay
// alone, and under load one run serves as many callers as arrive during one run's time.
// No caller runs the step for items that arrived after it was released, so nobody is
// kept working for others for long.
package groupcommit

import "sync"

// Queue is one group-commit queue; its zero value is ready to use. T is what a caller
// hands the step, usually a pointer in which the step records the caller's outcome.
type Queue[T any] struct {
	mu      sync.Mutex
	busy    bool         // a run is under way: newcomers queue
	waiting []*member[T] // in arrival order; the first leads the next run
}

type member[T any] struct {
	item T
	wake chan bool // true: lead the next run (this item first); false: done
}

// Do runs step over item and the items of the callers queued with it, and returns once
// that run has ended, whether it returned or panicked (the panic goes on in the caller
// that ran the step; the others return). The batch holds at most limit items (limit <=
// 0: no limit), the running caller's own first. step must record each item's outcome in
// the item; a caller reads its own outcome there after Do returns.
func (q *Queue[T]) Do(item T, limit int, step func(batch []T)) {
	m := &member[T]{item: item, wake: make(chan bool, 1)}
	q.mu.Lock()
	q.waiting = append(q.waiting, m)
	if q.busy {
		q.mu.Unlock()
		if lead := <-m.wake; !lead {
			return
		}
		q.mu.Lock()
	}
	// Here m is first in the queue: it found none (a queue is only idle when empty), or
	// handOn woke it as the first.
	q.busy = true
	n := len(q.waiting)
	if limit > 0 {
		n = min(n, limit)
	}
	batch := make([]*member[T], n)
	copy(batch, q.waiting)
	rest := copy(q.waiting, q.waiting[n:])
	clear(q.waiting[rest:])
	q.waiting = q.waiting[:rest]
	q.mu.Unlock()
	defer func() {
		q.handOn()
		for _, o := range batch[1:] {
			o.wake <- false
		}
	}()
	items := make([]T, n)
	for i, o := range batch {
		items[i] = o.item
	}
	step(items)
}

// handOn ends a run: the first queued caller leads the next one, or, with nobody
// queued, the next caller runs at once.
func (q *Queue[T]) handOn() {
	q.mu.Lock()
	if len(q.waiting) == 0 {
		q.busy = false
		q.mu.Unlock()
		return
	}
	next := q.waiting[0]
	q.mu.Unlock()
	next.wake <- true
}

// Hold marks the queue busy, as while a run is under way, so callers queue; release
// ends the held run as a run's end does. For tests that need a batch to form.
func (q *Queue[T]) Hold() (release func()) {
	q.mu.Lock()
	q.busy = true
	q.mu.Unlock()
	return q.handOn
}

// Waiting is how many callers are queued.
func (q *Queue[T]) Waiting() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.waiting)
}
