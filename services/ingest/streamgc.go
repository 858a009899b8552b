package ingest

import (
	"math"
	"runtime/debug"
	"sync"
)

// While a topology streams, the collector may let the heap grow to three times what is
// live instead of twice (GOGC 200 rather than 100), within a soft memory limit of
// 1.5 GiB when the process has none: a stream allocates every instance's job twice, its
// payload and its event, and the embedded server its message, and at a million
// instances the collector was a fifth of the work. The limit makes the collector work
// harder before the heap passes it, so the 2 GiB a million instances may take holds.
// A setting the operator made that already asks for less collection is kept. The last
// stream to end puts both back.
const (
	streamGCPercent   = 200
	streamMemoryLimit = 3 << 29 // 1.5 GiB
)

var streamGC struct {
	sync.Mutex
	streams        int
	percent, limit int64 // what to put back; 0: nothing was changed
}

// beginStreamGC relaxes the collector for a stream; endStreamGC undoes it.
func beginStreamGC() {
	streamGC.Lock()
	defer streamGC.Unlock()
	streamGC.streams++
	if streamGC.streams > 1 {
		return
	}
	streamGC.percent, streamGC.limit = 0, 0
	if prev := debug.SetGCPercent(streamGCPercent); prev < 0 || prev >= streamGCPercent {
		debug.SetGCPercent(prev) // off, or already as relaxed
	} else {
		streamGC.percent = int64(prev)
	}
	if streamGC.percent != 0 && debug.SetMemoryLimit(-1) == math.MaxInt64 {
		debug.SetMemoryLimit(streamMemoryLimit)
		streamGC.limit = math.MaxInt64
	}
}

func endStreamGC() {
	streamGC.Lock()
	defer streamGC.Unlock()
	streamGC.streams--
	if streamGC.streams > 0 {
		return
	}
	if streamGC.percent != 0 {
		debug.SetGCPercent(int(streamGC.percent))
	}
	if streamGC.limit != 0 {
		debug.SetMemoryLimit(streamGC.limit)
	}
}
