package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/services/ingest"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// runScale measures what grows with the log on a log of o.scale whole job histories:
// the read side's catch-up and memory, job reads, and the replay. The log is built once:
// one real /bin/true job runs through every service, and its history is copied for
// every other job (fresh job and event IDs, the job ID replaced in every payload, each
// history chained by its own prevseq and prevhash), published straight to the stream.
// Then a process's read side (projection, mirror, HTTP API) and ingest start on it, as
// `gridwire serve` starts on an existing log; the other services hold no state per job
// beyond their bounded state cache. The replay is measured before, on the log alone.
func runScale(ctx context.Context, e *env, o *benchOpts) (benchResult, error) {
	r := benchResult{CPUs: runtime.NumCPU(), Load: loadAvg()}
	dir := filepath.Join(o.data, "scale")
	var srv *natsServer
	if o.natsServer != "" {
		var err error
		if srv, err = startNATSServer(ctx, o.natsServer, dir); err != nil {
			return r, err
		}
		defer srv.stop()
		o.natsURL = srv.url
	}
	sample, err := existingLog(ctx, e, o, dir, 10000)
	if err != nil {
		return r, err
	}
	if sample == nil {
		tmpl, err := templateHistory(ctx, e, o, dir)
		if err != nil {
			return r, err
		}
		start := time.Now()
		if sample, err = fillLog(ctx, e, o, dir, tmpl, o.scale-1, 10000); err != nil {
			return r, err
		}
		r.FillSeconds = time.Since(start).Seconds()
	} else {
		fmt.Fprintf(e.stderr, "bench: reusing the log in %s (built for --scale %d)\n", dir, o.scale)
	}
	if !o.noReplay {
		if err := replayAlone(ctx, e, o, dir, &r); err != nil {
			return r, err
		}
		fmt.Fprintf(e.stderr, "bench: replay %.0f events/s, raw consume %.0f/s\n", r.ReplayPerSec, r.RawConsumePerSec)
	}
	runtime.GC()
	debug.FreeOSMemory()

	opened := time.Now()
	sys, err := benchSystem(ctx, e, o, dir, []string{"ingest", "readside"})
	if err != nil {
		return r, err
	}
	r.StartSeconds = time.Since(opened).Seconds()
	defer sys.stop()
	base := "http://" + sys.listener.Addr().String()
	start := time.Now() // the server has recovered the store: the read side starts now
	if r.LogEvents, err = caughtUp(sys.ctx, sys.bus.JS, base, time.Hour); err != nil {
		return r, sys.why(err)
	}
	r.CatchUpSeconds = time.Since(start).Seconds()
	r.LogJobs = o.scale
	r.RSSMiB, r.HeapMiB = memory(o.memProfile)
	sr := &scaleRow{CaughtUp: splitHeap(), ExternalServer: srv != nil}
	r.Scale = sr
	sr.ServerRSSMiB = srv.rss()
	cpu0, _ := cpuTimes()
	if r.Reads, err = measureReads(ctx, base, sys.bus.Conn, sample, o.readJobs); err != nil {
		return r, err
	}
	cpu1, _ := cpuTimes()
	sr.ReadCPUMicros = float64((cpu1 - cpu0).Microseconds()) / float64(max(o.readJobs, 1))
	sr.AfterReads = measureMemory(profileAt(o.memProfile, "reads"))
	sr.AfterReads.ServerRSSMiB = srv.rss()
	if o.settle > 0 {
		select {
		case <-ctx.Done():
			return r, ctx.Err()
		case <-time.After(o.settle):
		}
		sr.Settled = measureMemory(profileAt(o.memProfile, "settled"))
		sr.Settled.ServerRSSMiB = srv.rss()
	}
	fmt.Fprintf(e.stderr, "bench: heap caught up: NATS server %.0f MiB (subject trees %.0f), gridwire %.0f MiB; reads %.0f us of CPU a job; after them RSS %.0f MiB (heap %.0f)\n",
		sr.CaughtUp.ServerMiB, sr.CaughtUp.SubjectTreesMiB, sr.CaughtUp.GridwireMiB, sr.ReadCPUMicros, sr.AfterReads.RSSMiB, sr.AfterReads.HeapMiB)
	fmt.Fprintf(e.stderr, "bench: %d events; started in %.1f s, caught up in %.1f s; RSS %.0f MiB (heap %.0f); job read p50/p99 %.2f/%.2f ms, events %.2f/%.2f ms (store's walk of another job %.2f/%.2f ms), direct get %.2f/%.2f ms\n",
		r.LogEvents, r.StartSeconds, r.CatchUpSeconds, r.RSSMiB, r.HeapMiB, r.Reads.JobP50, r.Reads.JobP99,
		r.Reads.EventsP50, r.Reads.EventsP99, r.Reads.WalkP50, r.Reads.WalkP99, r.Reads.GetP50, r.Reads.GetP99)
	r.Load += " -> " + loadAvg()
	return r, nil
}

// replayAlone measures the replay (and its raw read) on the log in dir with nothing else
// running: its table is the only one in the process, dropped before the read side
// starts, so a million-job run holds one job table at a time (a replay beside the
// caught-up read side held two, and passed 13 GB).
func replayAlone(ctx context.Context, e *env, o *benchOpts, dir string, r *benchResult) error {
	sys, err := openSystem(ctx, &env{getenv: func(string) string { return "" }, stdout: e.stdout, stderr: e.stderr}, o.scaleBus(dir), true)
	if err != nil {
		return err
	}
	defer sys.close()
	return measureReplay(ctx, sys.bus.JS, r)
}

// existingLog is nil when dir holds no log yet; else up to keep job IDs of the log
// there (a --scale run before built it), read from random sequences of the stream: the
// million-job log is built once and measured as often as wanted.
func existingLog(ctx context.Context, e *env, o *benchOpts, dir string, keep int) ([]string, error) {
	if _, err := os.Stat(filepath.Join(dir, "jetstream")); err != nil {
		return nil, nil
	}
	sys, err := openSystem(ctx, &env{getenv: func(string) string { return "" }, stdout: e.stdout, stderr: e.stderr}, o.scaleBus(dir), true)
	if err != nil {
		return nil, err
	}
	defer sys.close()
	stream, err := sys.bus.JS.Stream(ctx, events.Stream)
	if err != nil {
		return nil, err
	}
	st := stream.CachedInfo().State
	if st.Msgs == 0 {
		return nil, nil
	}
	ids := make([]string, 0, keep)
	for len(ids) < keep {
		m, err := stream.GetMsg(ctx, st.FirstSeq+rand.Uint64N(st.LastSeq-st.FirstSeq+1))
		if err != nil {
			return nil, err
		}
		if id, ok := events.JobOfSubject(m.Subject); ok {
			ids = append(ids, id)
		}
	}
	return ids, nil
}

// templateHistory runs one /bin/true job through every service on a fresh log in dir
// and returns its history.
func templateHistory(ctx context.Context, e *env, o *benchOpts, dir string) ([]events.Event, error) {
	sys, err := benchSystem(ctx, e, o, dir, allServices)
	if err != nil {
		return nil, err
	}
	defer sys.stop()
	ends := newEndWatch()
	sub, err := sys.bus.Conn.Subscribe(events.SubjectEvent, ends.observe)
	if err != nil {
		return nil, err
	}
	defer sub.Unsubscribe()
	acc, err := sys.ingest.Submit(sys.ctx, ingest.Submission{File: "bench.json", Data: trueJob(), Submitter: "bench"})
	if err != nil {
		return nil, sys.why(err)
	}
	if err := ends.waitJob(sys.ctx, acc.Jobs[0], time.Minute); err != nil {
		return nil, sys.why(err)
	}
	h, err := events.NewStore(sys.bus.Conn, sys.bus.JS, "bench").Load(ctx, acc.Jobs[0])
	return h.Events, err
}

// fillLog publishes n copies of the template history to the log in dir, in chunks of
// jobs whose k-th events go out together (each event's prevseq is the sequence its
// predecessor got). It returns up to keep of the new job IDs, picked at random.
func fillLog(ctx context.Context, e *env, o *benchOpts, dir string, tmpl []events.Event, n, keep int) ([]string, error) {
	sys, err := openSystem(ctx, &env{getenv: func(string) string { return "" }, stdout: e.stdout, stderr: e.stderr}, o.scaleBus(dir), true)
	if err != nil {
		return nil, err
	}
	defer sys.close()
	var sample []string
	const chunk = 2048 // below the async publisher's limit of outstanding messages (4,000)
	for from := 0; from < n; from += chunk {
		ids, err := fillChunk(ctx, sys.bus.JS, tmpl, min(chunk, n-from), from)
		if err != nil {
			return nil, err
		}
		for i, id := range ids { // reservoir sampling
			switch seen := from + i; {
			case len(sample) < keep:
				sample = append(sample, id)
			case rand.IntN(seen+1) < keep:
				sample[rand.IntN(keep)] = id
			}
		}
		if from%(chunk*128) == 0 && from > 0 {
			fmt.Fprintf(e.stderr, "bench: %d of %d histories stored\n", from, n)
		}
	}
	return sample, nil
}

// fillChunk stores m copies of tmpl, the first numbered at (for their times).
func fillChunk(ctx context.Context, js jetstream.JetStream, tmpl []events.Event, m, at int) ([]string, error) {
	oldID := []byte(tmpl[0].JobID)
	ids := make([]string, m)
	seqs := make([]uint64, m)
	hashes := make([]string, m)
	for i := range ids {
		ids[i] = events.NewID()
	}
	futures := make([]jetstream.PubAckFuture, m)
	for _, t := range tmpl {
		for i, id := range ids {
			ev := t
			ev.ID, ev.JobID = events.NewID(), id
			ev.Data = bytes.ReplaceAll(t.Data, oldID, []byte(id))
			ev.Time = t.Time.Add(time.Duration(at+i) * time.Millisecond)
			ev.PrevSeq, ev.PrevHash = seqs[i], hashes[i]
			body, err := ev.Encode()
			if err != nil {
				return nil, err
			}
			hashes[i] = events.HashOf(body)
			if futures[i], err = js.PublishMsgAsync(&nats.Msg{Subject: events.Subject(id, ev.Name, ev.Route), Data: body}); err != nil {
				return nil, err
			}
		}
		for i, f := range futures {
			select {
			case ack := <-f.Ok():
				seqs[i] = ack.Sequence
			case err := <-f.Err():
				return nil, err
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
	}
	return ids, nil
}

// scaleRow is what --scale measures beyond the rows every mode prints: where the heap
// goes once the read side has caught up, the CPU the reads cost (all of the process's
// threads, the embedded server's included, so it does not depend on the machine's load
// as the latencies do), and the memory after the reads and after --settle.
type scaleRow struct {
	CaughtUp heapSplit `json:"heap_caught_up"`
	// ExternalServer: the log was served by a nats-server process of its own
	// (--nats-server), whose RSS is ServerRSSMiB, not part of the RSS row.
	ExternalServer bool     `json:"external_nats_server,omitempty"`
	ServerRSSMiB   float64  `json:"external_nats_server_rss_mib,omitempty"`
	ReadCPUMicros  float64  `json:"read_cpu_us_per_job"` // a job read, its events read and the yardsticks (a direct get, another job's walk)
	AfterReads     memoryAt `json:"after_reads"`
	Settled        memoryAt `json:"settled,omitzero"`
}

// memoryAt is the process's memory at one moment, after a collection.
type memoryAt struct {
	RSSMiB  float64   `json:"rss_mib"`
	HeapMiB float64   `json:"heap_mib"`
	Split   heapSplit `json:"split"`
	// ServerRSSMiB is the external server's RSS at the same moment (--nats-server).
	ServerRSSMiB float64 `json:"external_nats_server_rss_mib,omitempty"`
}

func measureMemory(profile string) memoryAt {
	var m memoryAt
	m.RSSMiB, m.HeapMiB = memory(profile)
	m.Split = splitHeap()
	return m
}

// profileAt names the heap profile of a later moment beside --memprofile's: heap.prof
// -> heap.reads.prof. None without --memprofile.
func profileAt(profile, moment string) string {
	if profile == "" {
		return ""
	}
	ext := filepath.Ext(profile)
	return strings.TrimSuffix(profile, ext) + "." + moment + ext
}

// printScale prints the scale rows, if measured.
func printScale(w io.Writer, s *scaleRow) {
	if s == nil {
		return
	}
	split := func(h heapSplit) string {
		return fmt.Sprintf("NATS server %.0f MiB (its subject trees %.0f), gridwire %.0f MiB", h.ServerMiB, h.SubjectTreesMiB, h.GridwireMiB)
	}
	fmt.Fprintf(w, "  Go heap once caught up: %s\n", split(s.CaughtUp))
	if s.ExternalServer {
		fmt.Fprintf(w, "  the external nats-server (--nats-server), RSS: %.0f MiB once caught up, %.0f MiB after the reads\n",
			s.ServerRSSMiB, s.AfterReads.ServerRSSMiB)
	}
	fmt.Fprintf(w, "  CPU of the process per job read (job, its events, a direct get, the store's walk of another): %.0f us\n", s.ReadCPUMicros)
	fmt.Fprintf(w, "  after the reads: RSS %.0f MiB, heap %.0f MiB: %s\n", s.AfterReads.RSSMiB, s.AfterReads.HeapMiB, split(s.AfterReads.Split))
	if s.Settled.RSSMiB > 0 {
		fmt.Fprintf(w, "  settled (--settle): RSS %.0f MiB, heap %.0f MiB: %s\n", s.Settled.RSSMiB, s.Settled.HeapMiB, split(s.Settled.Split))
	}
}
