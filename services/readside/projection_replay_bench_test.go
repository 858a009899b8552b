package readside

import (
	"context"
	"testing"
	"time"

	"github.com/gridwire/gridwire/events"
	"github.com/nats-io/nats.go/jetstream"
)

// BenchmarkReplayVsRaw is issue 14's replay row on a log of 5,000 whole lives (55,000
// events): each iteration reads the stream raw (the yardstick: the ordered consumer a
// replay reads with, doing nothing with the messages), replays it into a table in
// memory, and reads it raw again, back to back; it reports both rates and the replay's
// over the mean of the two raw reads.
func BenchmarkReplayVsRaw(b *testing.B) {
	bus, _ := openBus(b)
	_, total := fillStream(b, bus.JS, 5000)
	ctx := context.Background()
	var raw, replay float64
	var rawCPU, replayCPU time.Duration
	for b.Loop() {
		c0 := cpuTime()
		r1 := rawRate(b, ctx, bus.JS)
		c1 := cpuTime()
		_, res, err := Rebuild(ctx, bus.JS, RebuildOptions{})
		if err != nil || int(res.Events) != total {
			b.Fatalf("folded %d of %d events: %v", res.Events, total, err)
		}
		c2 := cpuTime()
		r2 := rawRate(b, ctx, bus.JS)
		c3 := cpuTime()
		raw += (r1 + r2) / 2
		replay += res.Rate()
		rawCPU += (c1 - c0 + c3 - c2) / 2
		replayCPU += c2 - c1
	}
	b.ReportMetric(raw/float64(b.N), "raw-ev/s")
	b.ReportMetric(replay/float64(b.N), "replay-ev/s")
	b.ReportMetric(replay/raw, "x-raw")
	// The machine is shared: the CPU each costs (this process, the embedded server
	// included) says what the wall rates will be when the cores are busy.
	perEvent := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 / float64(b.N*total) }
	b.ReportMetric(perEvent(rawCPU), "raw-cpu-us/ev")
	b.ReportMetric(perEvent(replayCPU), "replay-cpu-us/ev")
}

func rawRate(b *testing.B, ctx context.Context, js jetstream.JetStream) float64 {
	start := time.Now()
	stream, err := js.Stream(ctx, events.Stream)
	if err != nil {
		b.Fatal(err)
	}
	info := stream.CachedInfo()
	cons, err := stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{events.SubjectAll},
		DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: info.State.FirstSeq})
	if err != nil {
		b.Fatal(err)
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(4096))
	if err != nil {
		b.Fatal(err)
	}
	defer it.Stop()
	n := 0
	for {
		m, err := it.Next()
		if err != nil {
			b.Fatal(err)
		}
		n++
		meta, err := m.Metadata()
		if err != nil {
			b.Fatal(err)
		}
		if meta.Sequence.Stream >= info.State.LastSeq {
			return float64(n) / time.Since(start).Seconds()
		}
	}
}
