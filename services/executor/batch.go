package executor

import (
	"context"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"
)

// Bounds of one start script: jobs, and bytes of their scripts (a job alone may exceed
// the bytes; it then goes alone).
const (
	maxBatchJobs  = 64
	maxBatchBytes = 4 << 20
)

// startBatcher is the group commit of starts on one host. A start enqueues its job and
// waits; up to Sessions loops each take whatever is pending and start all of it with one
// start script in one shell, then hand each caller its own verdict. A job that comes
// alone goes at once (no waiting for company: idle latency stays that of one start);
// while a script runs, the starts that come meanwhile queue up and go together in the
// next, so batches grow with the load and no further.
type startBatcher struct {
	sh       Shell
	sessions int
	script   func(nonce string, jobs []startJob) string
	// grace is how long a script goes on once every caller in it has gone, before it is
	// stopped; see run.
	grace time.Duration
	// limit bounds a script's run: a START still running after StaleLock counts as
	// abandoned anyway, and a hung one must not hold the others of its batch forever.
	limit time.Duration

	mu       sync.Mutex
	pending  []*startCall
	loops    int           // loops running
	inFlight chan struct{} // one token per script running (maxScriptsInFlight)
}

// startCall is one waiting start.
type startCall struct {
	ctx  context.Context
	job  startJob
	done chan batchResult // buffered: a loop never waits on a caller
}

// batchResult is one job's part of a start script's outcome.
type batchResult struct {
	verdict startVerdict
	hostKey string
	err     error // the script could not run, or said nothing about this job
}

// start runs the job's start in the next start script on the batcher's host.
//
// A caller whose ctx ends while its job waits in the queue takes the job out: it is
// never started (a loop that took it meanwhile leaves it out if its ctx has ended by
// then). One whose ctx ends while the script that carries its job runs returns at once,
// and the script goes on (for the other jobs, and see run): START may then run for this
// job with nobody to record it in the job's history. That is the case of an executor
// that dies after START ran, which starting already survives: the run is recorded
// beside the job under the start lock (the script writes the status before it prints
// anything), the caller's error leaves the delivery unacknowledged, and the next
// delivery of the job finds the lock's status and adopts the run instead of starting
// another.
func (b *startBatcher) start(ctx context.Context, job startJob) batchResult {
	c := &startCall{ctx: ctx, job: job, done: make(chan batchResult, 1)}
	b.mu.Lock()
	b.pending = append(b.pending, c)
	if b.loops < max(b.sessions, 1) {
		b.loops++
		go b.loop()
	}
	b.mu.Unlock()
	select {
	case r := <-c.done:
		return r
	case <-ctx.Done():
		b.mu.Lock()
		b.drop(c)
		b.mu.Unlock()
		return batchResult{err: ctx.Err()}
	}
}

// drop takes a waiting call out of the queue (nothing if a loop has taken it).
func (b *startBatcher) drop(c *startCall) {
	for i, p := range b.pending {
		if p == c {
			b.pending = append(b.pending[:i:i], b.pending[i+1:]...)
			return
		}
	}
}

// launchLinger is how long a loop whose script has every START under way still waits
// for the script's end before it goes on to the next batch. STARTs that end at once (a
// fork-like START, a batch server that answers quickly) end their script within it, so
// the next batch gathers the jobs that came meanwhile and a start costs its share of
// one shell, as when a loop waited for its script; a slow submission frees the loop
// after it, so the jobs that came meanwhile do not wait for it.
const launchLinger = 100 * time.Millisecond

// maxScriptsInFlight bounds the start scripts of one batcher that run at once, those
// whose STARTs are launched and that only wait for them included: a loop let go by
// launchLinger must not open a script every tenth of a second while a slow batch
// server answers none, which would leave thousands of submissions running at once on
// the host (at most 64 per script, so 1,024 here).
const maxScriptsInFlight = 16

// loop runs start scripts while jobs are pending, then ends. It goes on to the next
// batch when its script ends, or launchLinger after every START of the script is under
// way (a batch target's STARTs run in the background; what is left of the script is
// waiting for them and reporting each), whichever comes first; the script then goes on
// in its own goroutine until it ends.
func (b *startBatcher) loop() {
	for {
		calls := b.take()
		if calls == nil {
			return
		}
		b.inFlight <- struct{}{} // the jobs taken wait here while too many scripts run
		launched, ended := make(chan struct{}), make(chan struct{})
		go func() {
			defer func() { <-b.inFlight; close(ended) }()
			b.run(calls, sync.OnceFunc(func() { close(launched) }))
		}()
		<-launched
		linger := time.NewTimer(launchLinger)
		select {
		case <-ended:
		case <-linger.C:
		}
		linger.Stop()
	}
}

// take removes the next batch from the queue; nil (and the loop's end) when it is empty.
func (b *startBatcher) take() []*startCall {
	b.mu.Lock()
	defer b.mu.Unlock()
	n, size := 0, 0
	for n < len(b.pending) && n < maxBatchJobs && (n == 0 || size+b.pending[n].job.size() <= maxBatchBytes) {
		size += b.pending[n].job.size()
		n++
	}
	if n == 0 {
		b.loops--
		return nil
	}
	calls := append([]*startCall(nil), b.pending[:n]...)
	b.pending = append(b.pending[:0:0], b.pending[n:]...)
	return calls
}

// run starts one batch and hands each caller its verdict as soon as the script has
// printed it (startReader); launched is called once every START of the batch is under
// way, or when run returns. The script runs until it ends, or until grace after every
// caller in it has gone (an executor shutting down). Stopping it at once would kill the
// shell between a START it ran and the record of START's status, which leaves a lock
// without a status: the job would wait out StaleLock and then start a second time.
// Left to run, the script records every START it ran before it reports it, and a shell
// whose reader went away dies at its next print, before it takes another lock.
func (b *startBatcher) run(calls []*startCall, launched func()) {
	defer launched()
	live := calls[:0:0]
	for _, c := range calls {
		if c.ctx.Err() == nil {
			live = append(live, c)
		}
	}
	if len(live) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), b.limit)
	defer cancel()
	var left atomic.Int64
	left.Store(int64(len(live)))
	jobs := make([]startJob, len(live))
	for i, c := range live {
		jobs[i] = c.job
		stop := context.AfterFunc(c.ctx, func() {
			if left.Add(-1) == 0 {
				time.AfterFunc(b.grace, cancel)
			}
		})
		defer stop()
	}
	nonce := newNonce()
	var hostKey string
	var r *startReader
	r = newStartReader(nonce, len(live), func(k int) {
		live[k].done <- batchResult{verdict: r.verdicts[k], hostKey: hostKey}
	}, launched)
	out, err := b.sh.Stream(ctx, b.script(nonce, jobs), func(key string) io.Writer { hostKey = key; return r })
	r.Close()
	for k, c := range live {
		if r.told[k] {
			continue
		}
		switch {
		case err != nil:
			c.done <- batchResult{err: err}
		default:
			c.done <- batchResult{err: fmt.Errorf("the start script ended before reporting job %s: %s", c.job.id, out.Describe())}
		}
	}
}
