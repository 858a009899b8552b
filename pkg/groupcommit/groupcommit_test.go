package groupcommit

import (
	"slices"
	"sync"
	"testing"
	"time"
)

type item struct {
	n     int
	batch []int // the batch the item was run in
}

func record(batch []*item) {
	ns := make([]int, len(batch))
	for i, it := range batch {
		ns[i] = it.n
	}
	for _, it := range batch {
		it.batch = ns
	}
}

// waitQueued waits until n callers are queued.
func waitQueued(t *testing.T, q *Queue[*item], n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); q.Waiting() < n; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d queued, want %d", q.Waiting(), n)
		}
	}
}

func TestLoneCallerRunsAloneAtOnce(t *testing.T) {
	var q Queue[*item]
	for n := range 3 {
		it := &item{n: n}
		q.Do(it, 0, record)
		if !slices.Equal(it.batch, []int{n}) {
			t.Fatalf("call %d ran in %v, want alone", n, it.batch)
		}
	}
	if q.Waiting() != 0 || q.busy {
		t.Fatalf("queue left busy (%v) or with %d waiting", q.busy, q.Waiting())
	}
}

// Callers that arrive during a run are run together by the first of them, in arrival
// order, at most limit at a time; each returns with its own outcome.
func TestQueuedCallersShareRunsUpToTheLimit(t *testing.T) {
	var q Queue[*item]
	release := q.Hold()
	items := make([]*item, 5)
	var wg sync.WaitGroup
	for i := range items {
		items[i] = &item{n: i}
		wg.Add(1)
		go func() { defer wg.Done(); q.Do(items[i], 3, record) }()
		waitQueued(t, &q, i+1) // one at a time, so arrival order is known
	}
	release()
	wg.Wait()
	want := [][]int{{0, 1, 2}, {0, 1, 2}, {0, 1, 2}, {3, 4}, {3, 4}}
	for i, it := range items {
		if !slices.Equal(it.batch, want[i]) {
			t.Fatalf("item %d ran in %v, want %v", i, it.batch, want[i])
		}
	}
	if q.busy || q.Waiting() != 0 {
		t.Fatal("queue not idle after the runs")
	}
}

// A run that panics still releases its batch and hands the queue on: the panic goes on
// in the caller that ran it only, and later callers are served.
func TestPanickingRunReleasesItsBatch(t *testing.T) {
	var q Queue[*item]
	release := q.Hold()
	panicked := make(chan any, 1)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		defer func() { panicked <- recover() }()
		q.Do(&item{n: 0}, 0, func([]*item) { panic("boom") })
	}()
	waitQueued(t, &q, 1)
	member := &item{n: 1}
	go func() { defer wg.Done(); q.Do(member, 0, record) }()
	waitQueued(t, &q, 2)
	release()
	wg.Wait()
	if p := <-panicked; p != "boom" {
		t.Fatalf("the running caller recovered %v, want boom", p)
	}
	if member.batch != nil {
		t.Fatalf("the member was run (%v), though its batch's run panicked", member.batch)
	}
	after := &item{n: 2}
	q.Do(after, 0, record)
	if !slices.Equal(after.batch, []int{2}) {
		t.Fatalf("after the panic: ran in %v", after.batch)
	}
}

// Under contention every caller returns, each item run exactly once.
func TestEveryCallerRunOnce(t *testing.T) {
	var q Queue[*item]
	var mu sync.Mutex
	runs := map[int]int{}
	var wg sync.WaitGroup
	for i := range 500 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			q.Do(&item{n: i}, 8, func(batch []*item) {
				if len(batch) > 8 {
					t.Errorf("batch of %d", len(batch))
				}
				mu.Lock()
				for _, it := range batch {
					runs[it.n]++
				}
				mu.Unlock()
			})
		}()
	}
	wg.Wait()
	for i := range 500 {
		if runs[i] != 1 {
			t.Fatalf("item %d run %d times", i, runs[i])
		}
	}
}
