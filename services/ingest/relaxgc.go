package ingest

import (
	"math"
	"runtime/debug"
	"sync"
	"time"
)

// While a topology streams or a bulk submission is prepared and stored, the collector
// may let the heap grow to three times what is live instead of twice (GOGC 200 rather
// than 100), within a soft memory limit of 1.5 GiB when the process has none: a stream
// allocates every instance's job twice, its payload and its event, and the embedded
// server its message, and at a million instances the collector was a fifth of the work;
// a bulk job allocates about 11 KB between ingest, the store's client and an embedded
// server, and the collector took a third of a bulk submission's CPU. The limit makes
// the collector work harder before the heap passes it, so the 2 GiB a million instances
// may take holds. A setting the operator made that already asks for less collection is
// kept. The last stream or bulk submission to end puts both back.
const (
	relaxedGCPercent   = 200
	relaxedMemoryLimit = 3 << 29 // 1.5 GiB
)

var relaxedGC struct {
	sync.Mutex
	users          int
	percent, limit int64 // what to put back; 0: nothing was changed
}

// relaxGC relaxes the collector for a stream or a bulk submission; restoreGC undoes it.
func relaxGC() {
	relaxedGC.Lock()
	defer relaxedGC.Unlock()
	relaxedGC.users++
	if relaxedGC.users > 1 {
		return
	}
	relaxedGC.percent, relaxedGC.limit = 0, 0
	if prev := debug.SetGCPercent(relaxedGCPercent); prev < 0 || prev >= relaxedGCPercent {
		debug.SetGCPercent(prev) // off, or already as relaxed
	} else {
		relaxedGC.percent = int64(prev)
	}
	if relaxedGC.percent != 0 && debug.SetMemoryLimit(-1) == math.MaxInt64 {
		debug.SetMemoryLimit(relaxedMemoryLimit)
		relaxedGC.limit = math.MaxInt64
	}
}

func restoreGC() {
	relaxedGC.Lock()
	defer relaxedGC.Unlock()
	relaxedGC.users--
	if relaxedGC.users > 0 {
		return
	}
	if relaxedGC.percent != 0 {
		debug.SetGCPercent(int(relaxedGC.percent))
	}
	if relaxedGC.limit != 0 {
		debug.SetMemoryLimit(relaxedGC.limit)
	}
}

// gcLingerFor is how long single submissions stored together keep the collector
// relaxed after the last batch of them (relaxGCLingering).
const gcLingerFor = time.Second

var gcLinger struct {
	sync.Mutex
	on    bool      // relaxGC was called for the linger and not yet undone
	until time.Time // when to undo it, unless another batch comes first
}

// relaxGCLingering relaxes the collector, as relaxGC does, while single submissions are
// stored together (createQueue): under a burst of them each job allocates about 13 KB,
// as a bulk job does, and the collector took a fifth of their CPU. The batches come one
// after another with short gaps, so rather than a relaxGC and a restoreGC around each
// (the gap would put the collector back each time), the collector stays relaxed until
// gcLingerFor has passed without a batch.
func relaxGCLingering(now time.Time) {
	gcLinger.Lock()
	defer gcLinger.Unlock()
	gcLinger.until = now.Add(gcLingerFor)
	if gcLinger.on {
		return
	}
	gcLinger.on = true
	relaxGC()
	time.AfterFunc(gcLingerFor, func() { endGCLinger(time.Now()) })
}

// endGCLinger undoes relaxGCLingering once its time is up at now (true), or looks again
// when it will be.
func endGCLinger(now time.Time) bool {
	gcLinger.Lock()
	defer gcLinger.Unlock()
	if !gcLinger.on {
		return true
	}
	if left := gcLinger.until.Sub(now); left > 0 {
		time.AfterFunc(left, func() { endGCLinger(time.Now()) })
		return false
	}
	gcLinger.on = false
	restoreGC()
	return true
}
