package main

import (
	"runtime"
	"testing"
)

// The heap split counts what this process allocated as gridwire's, and what the embedded
// server allocated as the server's.
func TestSplitHeapAttributesAllocations(t *testing.T) {
	runtime.GC()
	before := splitHeap()
	held := make([][]byte, 64)
	for i := range held {
		held[i] = make([]byte, 1<<20)
	}
	runtime.GC()
	after := splitHeap()
	runtime.KeepAlive(held)
	if grew := after.GridwireMiB - before.GridwireMiB; grew < 56 || grew > 72 {
		t.Errorf("64 MiB allocated here: gridwire's share grew by %.1f MiB (%+v -> %+v)", grew, before, after)
	}
	if d := after.ServerMiB - before.ServerMiB; d > 8 || d < -8 {
		t.Errorf("the server's share moved by %.1f MiB when only the test allocated", d)
	}
}
