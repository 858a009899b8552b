package readside

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gridwire/gridwire/events"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// fillStream stores jobs whole lives (11 events each) with correct chains, publishing
// one round of events (the k-th event of every job) asynchronously at a time, since
// each event's prevseq is the sequence its predecessor got.
func fillStream(tb testing.TB, js jetstream.JetStream, jobs int) (ids []string, total int) {
	tb.Helper()
	ctx := context.Background()
	type chain struct {
		seq  uint64
		hash string
	}
	lives := make([][]step, jobs)
	chains := make([]chain, jobs)
	for i := range lives {
		id := events.NewID()
		ids = append(ids, id)
		lives[i] = life(id, fmt.Sprintf("c%d", i%4), i)
	}
	for k := 0; ; k++ {
		futures := make([]jetstream.PubAckFuture, jobs)
		hashes := make([]string, jobs)
		any := false
		for i, l := range lives {
			if k >= len(l) {
				continue
			}
			any = true
			e, err := events.New(ids[i], l[k].Name, l[k].Route, t0.Add(time.Duration(k)*time.Second), l[k].Payload)
			if err != nil {
				tb.Fatal(err)
			}
			e.Source, e.PrevSeq, e.PrevHash = "bench/fill", chains[i].seq, chains[i].hash
			body, err := e.Encode()
			if err != nil {
				tb.Fatal(err)
			}
			msg := &nats.Msg{Subject: events.Subject(e.JobID, e.Name, e.Route), Data: body}
			if futures[i], err = js.PublishMsgAsync(msg); err != nil {
				tb.Fatal(err)
			}
			hashes[i] = events.HashOf(body)
			total++
		}
		if !any {
			return ids, total
		}
		for i, f := range futures {
			if f == nil {
				continue
			}
			select {
			case ack := <-f.Ok():
				chains[i] = chain{ack.Sequence, hashes[i]}
			case err := <-f.Err():
				tb.Fatal(err)
			case <-ctx.Done():
			}
		}
	}
}

// BenchmarkRebuild measures a replay of the whole log into a fresh projection bucket:
// reading the stream, decoding, folding and writing every job's row.
func BenchmarkRebuild(b *testing.B) {
	bus, _ := openBus(b)
	_, total := fillStream(b, bus.JS, 20000)
	b.ResetTimer()
	var rate float64
	cpu0 := cpuTime()
	for i := 0; i < b.N; i++ {
		_, res, err := Rebuild(context.Background(), bus.JS, RebuildOptions{Bucket: "bench-rebuilt"})
		if err != nil {
			b.Fatal(err)
		}
		if int(res.Events) != total || res.Refused != 0 {
			b.Fatalf("folded %d of %d events, %d refused", res.Events, total, res.Refused)
		}
		rate += res.Rate()
	}
	b.ReportMetric(rate/float64(b.N), "events/s")
	// The machine is shared: events per CPU-second (this process, the embedded server
	// included) says what a rebuild costs whatever else runs beside it.
	b.ReportMetric(float64(total*b.N)/(cpuTime()-cpu0).Seconds(), "events/cpu-s")
}

// cpuTime is the CPU time this process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkRebuildInMemory is a replay without writing the projection: reading the
// stream, decoding and folding.
func BenchmarkRebuildInMemory(b *testing.B) {
	bus, _ := openBus(b)
	_, total := fillStream(b, bus.JS, 20000)
	b.ResetTimer()
	var rate float64
	cpu0 := cpuTime()
	for i := 0; i < b.N; i++ {
		_, res, err := Rebuild(context.Background(), bus.JS, RebuildOptions{})
		if err != nil || int(res.Events) != total {
			b.Fatalf("folded %d of %d events: %v", res.Events, total, err)
		}
		rate += res.Rate()
	}
	b.ReportMetric(rate/float64(b.N), "events/s")
	b.ReportMetric(float64(total*b.N)/(cpuTime()-cpu0).Seconds(), "events/cpu-s")
}

// BenchmarkFold is the fold alone: decoding and folding stored bodies in memory.
func BenchmarkFold(b *testing.B) {
	bodies := sampleBodies(b)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t := NewTable()
		for k, body := range bodies {
			e, err := events.DecodeStored(body, "", 0)
			if err != nil {
				b.Fatal(err)
			}
			e.Seq = uint64(k + 1)
			if _, err := t.Apply(e); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.N*len(bodies))/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkSSEFanout streams every event to 100 SSE clients at once: each b.N event
// is appended once and must reach all 100 clients. It reports deliveries per second
// (events × clients) and the time from an append to its arrival at the last client.
func BenchmarkSSEFanout(b *testing.B) {
	const clients = 100
	bus, st := openBus(b)
	url := serve(b, bus, st, Config{NoProjector: true}, nil).URL
	var received sync.WaitGroup
	var ready sync.WaitGroup
	lastSeen := make([]atomic.Int64, clients) // unix nanos of each client's last event
	for i := 0; i < clients; i++ {
		ready.Add(1)
		resp, err := http.Get(url + "/v1/events")
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { resp.Body.Close() })
		received.Add(1)
		go func() {
			defer received.Done()
			sc := bufio.NewScanner(resp.Body)
			sc.Buffer(make([]byte, 64<<10), 1<<20)
			n := 0
			for sc.Scan() {
				line := sc.Bytes()
				if bytes.HasPrefix(line, []byte(": gridwire")) {
					ready.Done()
				}
				if bytes.HasPrefix(line, []byte("data: ")) {
					n++
					lastSeen[i].Store(time.Now().UnixNano())
					if n == b.N {
						return
					}
				}
			}
		}()
	}
	ready.Wait()
	id := events.NewID()
	bodies := make([][]byte, b.N)
	for i := range bodies {
		e, _ := events.New(id, events.HoldRequested, "", t0, events.Note{Reason: "fan-out"})
		e.Source = "bench/sse"
		bodies[i], _ = e.Encode()
	}
	b.ResetTimer()
	start := time.Now()
	for _, body := range bodies {
		if _, err := bus.JS.PublishAsync(events.Subject(id, events.HoldRequested, ""), body); err != nil {
			b.Fatal(err)
		}
	}
	<-bus.JS.PublishAsyncComplete()
	published := time.Since(start)
	received.Wait()
	var last int64
	for i := range lastSeen {
		last = max(last, lastSeen[i].Load())
	}
	took := time.Duration(last - start.UnixNano())
	b.ReportMetric(float64(b.N*clients)/took.Seconds(), "deliveries/s")
	b.ReportMetric(float64(b.N)/took.Seconds(), "events/s")
	b.ReportMetric(float64((took - published).Milliseconds()), "ms-drain-after-append")
}

// BenchmarkSSELatency appends one event at a time and waits until all 100 SSE clients
// have it: ns/op is the time from an append to its arrival at the last client.
func BenchmarkSSELatency(b *testing.B) {
	const clients = 100
	bus, st := openBus(b)
	url := serve(b, bus, st, Config{NoProjector: true}, nil).URL
	got := make(chan struct{}, clients*4)
	var ready sync.WaitGroup
	for i := 0; i < clients; i++ {
		ready.Add(1)
		resp, err := http.Get(url + "/v1/events")
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { resp.Body.Close() })
		go func() {
			sc := bufio.NewScanner(resp.Body)
			sc.Buffer(make([]byte, 64<<10), 1<<20)
			for sc.Scan() {
				switch line := sc.Bytes(); {
				case bytes.HasPrefix(line, []byte(": gridwire")):
					ready.Done()
				case bytes.HasPrefix(line, []byte("data: ")):
					got <- struct{}{}
				}
			}
		}()
	}
	ready.Wait()
	id := events.NewID()
	e, _ := events.New(id, events.HoldRequested, "", t0, events.Note{Reason: "latency"})
	e.Source = "bench/sse"
	body, _ := e.Encode()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := bus.JS.Publish(context.Background(), events.Subject(id, events.HoldRequested, ""), body); err != nil {
			b.Fatal(err)
		}
		for range clients {
			<-got
		}
	}
}
