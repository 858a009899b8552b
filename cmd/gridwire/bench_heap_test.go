package main

import (
	"runtime"
	"testing"
)

// The heap split counts what this process allocated as gridwire's, and what the embedded
// server allocated as the server's.
//
// The heap profile samples about one allocation per 512 KiB, so the split is an estimate.
// Blocks of 4 MiB are each sampled with a probability of 1-e^-8 (99.97%), which makes the
// 64 MiB the test holds nearly exact; blocks of 1 MiB were sampled with 86%, and the
// estimate's spread (about 3 MiB) once carried it past the bound in CI.
func TestSplitHeapAttributesAllocations(t *testing.T) {
	runtime.GC()
	before := splitHeap()
	held := make([][]byte, 16)
	for i := range held {
		held[i] = make([]byte, 4<<20)
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
