package main

import (
	"math"
	"runtime"
	"strings"
)

// heapSplit is the Go heap in use, split by who allocated it: the embedded NATS server
// (of which its subject trees: each stream's index of subjects and each message block's
// per-subject state) and everything else: gridwire's own, with the libraries it calls
// (the NATS client's buffers among them). The figures come from the
// runtime's sampled heap profile as of the last collection, scaled up as pprof scales
// them, so they are estimates; at hundreds of MiB they agree with `go tool pprof` of the
// same process to within a few percent.
type heapSplit struct {
	ServerMiB       float64 `json:"nats_server_mib"`
	SubjectTreesMiB float64 `json:"nats_subject_trees_mib"`
	GridwireMiB     float64 `json:"gridwire_mib"`
}

// splitHeap reads the heap profile (call it right after a runtime.GC).
func splitHeap() heapSplit {
	var recs []runtime.MemProfileRecord
	n, _ := runtime.MemProfile(nil, false)
	for {
		recs = make([]runtime.MemProfileRecord, n+64)
		var ok bool
		if n, ok = runtime.MemProfile(recs, false); ok {
			recs = recs[:n]
			break
		}
	}
	var s heapSplit
	rate := float64(runtime.MemProfileRate)
	for i := range recs {
		r := &recs[i]
		bytes := inUse(r, rate)
		if bytes == 0 {
			continue
		}
		server, tree := allocatedBy(r.Stack())
		switch {
		case tree:
			s.SubjectTreesMiB += bytes
			s.ServerMiB += bytes
		case server:
			s.ServerMiB += bytes
		default:
			s.GridwireMiB += bytes
		}
	}
	const mib = 1 << 20
	s.ServerMiB, s.SubjectTreesMiB, s.GridwireMiB = s.ServerMiB/mib, s.SubjectTreesMiB/mib, s.GridwireMiB/mib
	return s
}

// inUse is a record's bytes in use, unsampled: each sampled allocation of the record's
// average size stands for 1/(1-e^(-size/rate)) of them (runtime/pprof's scaling).
func inUse(r *runtime.MemProfileRecord, rate float64) float64 {
	objs, bytes := r.InUseObjects(), r.InUseBytes()
	if objs <= 0 || bytes <= 0 {
		return 0
	}
	if rate <= 1 {
		return float64(bytes)
	}
	avg := float64(bytes) / float64(objs)
	return float64(bytes) / (1 - math.Exp(-avg/rate))
}

// allocatedBy says whether a stack allocated for the NATS server, and whether in one of
// its subject trees (package server/stree). The innermost frame of the server's, of
// gridwire's or of the NATS client's decides; a stack with none is gridwire's.
func allocatedBy(stack []uintptr) (server, tree bool) {
	frames := runtime.CallersFrames(stack)
	for {
		f, more := frames.Next()
		switch fn := f.Function; {
		case strings.Contains(fn, "nats-server/v2/server/stree."):
			return true, true
		case strings.Contains(fn, "nats-server/v2/"):
			return true, false
		case strings.HasPrefix(fn, "main.") || strings.Contains(fn, "gridwire/") || strings.Contains(fn, "nats.go"):
			return false, false
		}
		if !more {
			return false, false
		}
	}
}
