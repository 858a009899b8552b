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

type stateCache struct {
	mu  sync.Mutex
	max int
	ll  *list.List
	m   map[string]*list.Element
}

func newStateCache(max int) *stateCache {
	return &stateCache{max: max, ll: list.New(), m: map[string]*list.Element{}}
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
	return el.Value.(State), true
}

// put stores st unless a newer state of the job is already cached.
func (c *stateCache) put(st State) {
	if c == nil || c.max <= 0 || st.JobID == "" {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.m[st.JobID]; ok {
		if el.Value.(State).LastSeq > st.LastSeq {
			return
		}
		el.Value = st
		c.ll.MoveToFront(el)
		return
	}
	c.m[st.JobID] = c.ll.PushFront(st)
	for c.ll.Len() > c.max {
		old := c.ll.Back()
		c.ll.Remove(old)
		delete(c.m, old.Value.(State).JobID)
	}
}
