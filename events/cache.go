package events

import (
	"container/list"
	"sync"
)

// StateCache keeps the most recently used folded states, so a decision about a job
// this process has seen costs one read of the job's last event instead of a replay, or
// nothing at all when the event being reacted to follows the cached state. One cache may
// be shared by every Store of a process: states are never mutated (Apply returns new
// values), and a cached state is only ever behind the log, never ahead of it.
type StateCache = stateCache

// NewStateCache returns a cache of at most n job states.
func NewStateCache(n int) *StateCache { return newStateCache(n) }

// NewBoundedStateCache returns a cache of at most n job states taking about at most
// maxBytes of memory together (see StateSize); the least recently used go first. A
// state larger than maxBytes alone is not kept.
func NewBoundedStateCache(n int, maxBytes int64) *StateCache {
	c := newStateCache(n)
	c.maxBytes = maxBytes
	return c
}

type stateCache struct {
	mu       sync.Mutex
	max      int
	maxBytes int64 // 0: no limit but max
	bytes    int64
	ll       *list.List
	m        map[string]*list.Element
}

// cached is one entry: the state and the size it was counted at.
type cached struct {
	st   State
	size int64
}

func newStateCache(max int) *stateCache {
	return &stateCache{max: max, ll: list.New(), m: map[string]*list.Element{}}
}

// Limit is the cache's bound: how many states, and how many bytes (0: no byte bound).
func (c *stateCache) Limit() (states int, bytes int64) { return c.max, c.maxBytes }

// Len and Bytes are how many states the cache holds and their estimated size.
func (c *stateCache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ll.Len()
}

func (c *stateCache) Bytes() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.bytes
}

// StateSize estimates the memory a folded state holds: a fixed part for the structs,
// and what grows with the job: its original description, arguments, environment,
// rendered scripts and transfers.
func StateSize(st State) int64 {
	n := int64(1024)
	if j := st.Job; j != nil {
		n += int64(len(j.Original.Bytes) + len(j.Executable) + len(j.Name))
		for _, a := range j.Arguments {
			n += int64(len(a)) + 16
		}
		for _, e := range j.Environment {
			n += int64(len(e.Name)+len(e.Value)) + 32
		}
		n += int64(len(j.StageIn)+len(j.StageOut)+len(j.Children)) * 64
	}
	if inc := st.Incarnation; inc != nil {
		for k, sc := range inc.Scripts {
			n += int64(len(k)+len(sc.Body)+len(sc.SHA256)) + 48
		}
		for k, sc := range inc.StaticScripts {
			n += int64(len(k)+len(sc.Body)+len(sc.SHA256)) + 48
		}
	}
	return n + int64(len(st.Transfers))*256
}

func (c *stateCache) get(id string) (State, bool) {
	if c == nil || c.max <= 0 {
		return State{}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.m[id]
	if !ok {
		return State{}, false
	}
	c.ll.MoveToFront(el)
	return el.Value.(cached).st, true
}

// put stores st unless a newer state of the job is already cached.
func (c *stateCache) put(st State) {
	if c == nil || c.max <= 0 || st.JobID == "" {
		return
	}
	size := int64(0)
	if c.maxBytes > 0 {
		size = StateSize(st)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.m[st.JobID]; ok {
		old := el.Value.(cached)
		if old.st.LastSeq > st.LastSeq {
			return
		}
		c.bytes -= old.size
		c.ll.Remove(el)
		delete(c.m, st.JobID)
	}
	if c.maxBytes > 0 && size > c.maxBytes {
		return
	}
	c.m[st.JobID] = c.ll.PushFront(cached{st, size})
	c.bytes += size
	for c.ll.Len() > c.max || (c.maxBytes > 0 && c.bytes > c.maxBytes) {
		old := c.ll.Back()
		c.ll.Remove(old)
		e := old.Value.(cached)
		c.bytes -= e.size
		delete(c.m, e.st.JobID)
	}
}
