package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/services/readside"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// measureReads reads n jobs picked at random from ids through the HTTP API, one at a
// time (GET /v1/jobs/{id}, then its /events), and, as the yardstick, fetches each one's
// last event with one direct get: the least any read that touches the log costs. The
// events read has a second yardstick: the event store's own read of another job picked
// at random (the same walk through the job's links, without HTTP), so the read's blocks
// are as cold as the API's were: on a log much larger than the server's block cache,
// that is what a job's history costs the server.
func measureReads(ctx context.Context, base string, nc *nats.Conn, ids []string, n int) (reads, error) {
	var job, hist, get, walk []time.Duration
	js, err := jetstream.New(nc)
	if err != nil {
		return reads{}, err
	}
	store := events.NewStore(nc, js, "bench")
	client := &http.Client{Timeout: time.Minute}
	fetch := func(path string) (time.Duration, error) {
		t0 := time.Now()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
		if err != nil {
			return 0, err
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, err
		}
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err == nil && resp.StatusCode != http.StatusOK {
			err = fmt.Errorf("bench: GET %s: %s", path, resp.Status)
		}
		return time.Since(t0), err
	}
	for range n {
		id := ids[rand.IntN(len(ids))]
		d, err := fetch("/v1/jobs/" + id)
		if err != nil {
			return reads{}, err
		}
		job = append(job, d)
		if d, err = fetch("/v1/jobs/" + id + "/events"); err != nil {
			return reads{}, err
		}
		hist = append(hist, d)
		t0 := time.Now()
		req, _ := json.Marshal(map[string]string{"last_by_subj": events.JobFilter(id)})
		m, err := nc.RequestWithContext(ctx, "$JS.API.DIRECT.GET."+events.Stream, req)
		if err != nil {
			return reads{}, err
		}
		if st := m.Header.Get("Status"); st != "" {
			return reads{}, fmt.Errorf("bench: direct get of job %s: status %s", id, st)
		}
		get = append(get, time.Since(t0))
		t0 = time.Now()
		if _, err := store.Stored(ctx, ids[rand.IntN(len(ids))]); err != nil {
			return reads{}, err
		}
		walk = append(walk, time.Since(t0))
	}
	r := reads{N: n}
	r.JobP50, r.JobP99 = quantiles(job)
	r.EventsP50, r.EventsP99 = quantiles(hist)
	r.GetP50, r.GetP99 = quantiles(get)
	r.WalkP50, r.WalkP99 = quantiles(walk)
	return r, nil
}

// quantiles are the p50 and p99 of ds, in milliseconds.
func quantiles(ds []time.Duration) (p50, p99 float64) {
	if len(ds) == 0 {
		return 0, 0
	}
	slices.Sort(ds)
	return ms(ds[len(ds)/2]), ms(ds[len(ds)*99/100])
}

// measureReplay folds the whole stream into a fresh job table in memory (a replay, as
// `gridwire replay` does), and, as the yardstick, reads the same stream with the same
// consumer doing nothing with the messages. A replay of a small log takes a tenth of a
// second, too short to judge on a shared machine, so the two alternate, a raw read before
// and after each replay, until the replays have taken replayMeasureTime (at least
// replayRounds of them, at most replayRoundsMax; one when a replay alone takes longer):
// each rate is every event read over the time all of its reads took.
func measureReplay(ctx context.Context, js jetstream.JetStream, r *benchResult) error {
	var raw, replay time.Duration
	var rawEvents, replayEvents uint64
	readRaw := func() error {
		n, d, err := rawConsume(ctx, js)
		rawEvents, raw = rawEvents+n, raw+d
		return err
	}
	if err := readRaw(); err != nil {
		return err
	}
	for round := 1; ; round++ {
		_, res, err := readside.Rebuild(ctx, js, readside.RebuildOptions{})
		if err != nil {
			return err
		}
		replayEvents, replay = replayEvents+res.Events, replay+res.Duration
		r.ReplayEvents = res.Events
		if err := readRaw(); err != nil {
			return err
		}
		if round >= replayRoundsMax || round >= replayRounds && replay >= replayMeasureTime || res.Duration >= replayMeasureTime {
			break
		}
	}
	r.ReplayPerSec, r.RawConsumePerSec = perSecond(replayEvents, replay), perSecond(rawEvents, raw)
	return nil
}

// The replay row's measurement: see measureReplay.
const (
	replayMeasureTime = 2 * time.Second
	replayRounds      = 3
	replayRoundsMax   = 20
)

func perSecond(n uint64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// rawConsume reads every message of the stream with an ordered consumer, as the replay
// reads it, and only counts them: the messages and the time it took.
func rawConsume(ctx context.Context, js jetstream.JetStream) (uint64, time.Duration, error) {
	start := time.Now()
	stream, err := js.Stream(ctx, events.Stream)
	if err != nil {
		return 0, 0, err
	}
	info := stream.CachedInfo()
	if info.State.Msgs == 0 {
		return 0, 0, nil
	}
	cons, err := stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{events.SubjectAll},
		DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: info.State.FirstSeq})
	if err != nil {
		return 0, 0, err
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(4096))
	if err != nil {
		return 0, 0, err
	}
	defer it.Stop()
	stop := context.AfterFunc(ctx, it.Stop)
	defer stop()
	var n uint64
	for {
		m, err := it.Next()
		if err != nil {
			return 0, 0, err
		}
		n++
		meta, err := m.Metadata()
		if err != nil {
			return 0, 0, err
		}
		if meta.Sequence.Stream >= info.State.LastSeq {
			return n, time.Since(start), nil
		}
	}
}

// memory is this process's resident set and Go heap in use, in MiB, after a collection
// that returns what it can to the system.
func memory(profile string) (rss, heap float64) {
	runtime.GC()
	debug.FreeOSMemory()
	if profile != "" {
		if f, err := os.Create(profile); err == nil {
			_ = pprof.WriteHeapProfile(f)
			f.Close()
		}
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	heap = float64(ms.HeapInuse) / (1 << 20)
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, heap
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseFloat(f[1], 64)
			return kb / 1024, heap
		}
	}
	return 0, heap
}

// afterPipeline measures, on the log the pipeline left, what grows with the log: job
// reads once the read side has caught up, the replay, and the process's memory.
func afterPipeline(ctx context.Context, sys *system, ids []string, o *benchOpts, r *benchResult) error {
	base := "http://" + sys.listener.Addr().String()
	last, err := caughtUp(ctx, sys.bus.JS, base, time.Minute)
	if err != nil {
		return err
	}
	r.LogEvents = last
	r.LogJobs = len(ids) + o.latJobs
	if r.Reads, err = measureReads(ctx, base, sys.bus.Conn, ids, o.readJobs); err != nil {
		return err
	}
	if err := measureReplay(ctx, sys.bus.JS, r); err != nil {
		return err
	}
	r.RSSMiB, r.HeapMiB = memory(o.memProfile)
	return nil
}

// caughtUp waits until the read API's job table reflects the whole stream as it is when
// called; it returns the stream's last sequence.
func caughtUp(ctx context.Context, js jetstream.JetStream, base string, limit time.Duration) (uint64, error) {
	stream, err := js.Stream(ctx, events.Stream)
	if err != nil {
		return 0, err
	}
	last := stream.CachedInfo().State.LastSeq
	deadline := time.Now().Add(limit)
	for {
		var page readside.Page
		t0 := time.Now()
		resp, err := http.Get(base + "/v1/jobs?limit=1")
		if err == nil {
			err = json.NewDecoder(resp.Body).Decode(&page)
			resp.Body.Close()
		}
		took := time.Since(t0)
		if err == nil && page.Seq >= last {
			return last, nil
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("bench: the read side reflects seq %d of %d after %v (%v)", page.Seq, last, limit, err)
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(max(500*time.Millisecond, 10*took)):
			// A list is a pass over the whole table under its read lock (40 ms at
			// 200,000 jobs): polled every half second through a million-job catch-up,
			// it would take a share of the CPU and hold up the fold it waits for.
		}
	}
}

// jsCounts are cumulative JetStream counters of the account: API requests (creating
// consumers, pulls, stream and consumer info, ...), messages stored in JOBS, messages
// written to every other stream (the KV buckets: projection rows, idempotency keys,
// the watch list; counted by sequence, so a key put and then purged counts its two
// writes, not the one tombstone left), and messages delivered to JOBS's durable
// consumers.
type jsCounts struct {
	API, Stored, KV, Delivered uint64
}

func countJS(ctx context.Context, js jetstream.JetStream) (jsCounts, error) {
	var c jsCounts
	ai, err := js.AccountInfo(ctx)
	if err != nil {
		return c, err
	}
	c.API = ai.API.Total
	for name := range js.StreamNames(ctx).Name() {
		s, err := js.Stream(ctx, name)
		if err != nil {
			return c, err
		}
		if name != events.Stream {
			c.KV += s.CachedInfo().State.LastSeq
			continue
		}
		c.Stored = s.CachedInfo().State.Msgs
		for ci := range s.ListConsumers(ctx).Info() {
			if ci.Config.Durable != "" {
				c.Delivered += ci.Delivered.Consumer
			}
		}
	}
	return c, nil
}

// perJob is the counters' growth between a and b, per job.
func perJob(a, b jsCounts, jobs int) opsPerJob {
	n := float64(jobs)
	return opsPerJob{API: float64(b.API-a.API) / n, Stored: float64(b.Stored-a.Stored) / n,
		KV: float64(b.KV-a.KV) / n, Delivered: float64(b.Delivered-a.Delivered) / n}
}

// opsPerJob is what JetStream did per job of the pipeline run.
type opsPerJob struct {
	API       float64 `json:"api_requests"`
	Stored    float64 `json:"events_stored"`
	KV        float64 `json:"kv_writes"`
	Delivered float64 `json:"consumer_deliveries"`
}
