package events

import (
	"strings"
	"testing"
)

// A cache bounded by bytes drops the least recently used states to stay under its
// bound, counts a replaced state once, and keeps no state larger than the bound alone.
func TestStateCacheBoundedByBytes(t *testing.T) {
	big := func(id string, seq uint64, n int) State {
		return State{JobID: id, LastSeq: seq, Job: &Job{ID: id, Original: Original{Bytes: []byte(strings.Repeat("x", n))}}}
	}
	one := StateSize(big("a", 1, 4000))
	c := NewBoundedStateCache(100, 3*one)
	for i, id := range []string{"a", "b", "c"} {
		c.put(big(id, uint64(i+1), 4000))
	}
	if c.Len() != 3 || c.Bytes() != 3*one {
		t.Fatalf("three states: %d held, %d bytes, want 3 and %d", c.Len(), c.Bytes(), 3*one)
	}
	c.get("a")                // a is now the most recently used
	c.put(big("b", 9, 4000))  // replacing b counts it once
	c.put(big("d", 10, 4000)) // over the bound: c, the least recently used, goes
	if _, ok := c.get("c"); ok || c.Len() != 3 || c.Bytes() != 3*one {
		t.Fatalf("after an eviction: c kept %v, %d held, %d bytes", ok, c.Len(), c.Bytes())
	}
	for _, id := range []string{"a", "b", "d"} {
		if _, ok := c.get(id); !ok {
			t.Fatalf("%s evicted", id)
		}
	}
	c.put(big("e", 11, 20000)) // larger than the bound alone
	if _, ok := c.get("e"); ok || c.Len() != 3 {
		t.Fatalf("a state over the bound was kept (%d held)", c.Len())
	}
	c.put(big("a", 12, 100000)) // a grows past the bound: dropped, not kept stale
	if _, ok := c.get("a"); ok {
		t.Fatal("a state that outgrew the bound is still served")
	}
}
