package ptp

import (
	"syscall"
	"time"
)

type runtimeUsage struct{ total time.Duration }

// read is the process's user plus system CPU so far.
func (r *runtimeUsage) read() {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		r.total = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
}
