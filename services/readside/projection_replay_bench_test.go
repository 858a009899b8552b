package readside

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/events/eventstest"
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

// replayLog is n whole lives as a replay reads them (subject, body, sequence), bodies as
// Store writes them with a chain, a principal and a signature: no server involved.
func replayLog(tb testing.TB, n int) []storedMsg {
	var out []storedMsg
	for i := range n {
		id := events.NewID()
		for k, s := range life(id, fmt.Sprintf("c%d", i%4), i) {
			e, err := events.New(id, s.Name, s.Route, t0.Add(time.Duration(k)*time.Second+time.Duration(i)), s.Payload)
			if err != nil {
				tb.Fatal(err)
			}
			e.Source, e.Principal = "gridwire/stager/host-1", "alice"
			e.Signer, e.Signature = strings.Repeat("U", 56), strings.Repeat("s", 86)
			if k > 0 {
				e.PrevHash, e.PrevSeq = strings.Repeat("ab", 32), uint64(len(out))
			}
			body, err := e.Encode()
			if err != nil {
				tb.Fatal(err)
			}
			out = append(out, storedMsg{data: body, subject: events.Subject(id, s.Name, s.Route), seq: uint64(len(out) + 1)})
		}
	}
	return out
}

// BenchmarkReplayFold is a replay's fold alone, on one core: decoding and folding every
// message of 2,000 lives into a fresh table, the replay's way (events.DecodeFold, rows
// read and written once, counts at the end) and, as the yardstick of the change, the
// live projection's (events.DecodeStored, Table.Apply).
func BenchmarkReplayFold(b *testing.B) {
	msgs := replayLog(b, 2000)
	for _, c := range []struct {
		name string
		fold func([]storedMsg) *Table
	}{
		{"replay", func(msgs []storedMsg) *Table {
			s := &foldShard{rows: map[string]*foldingRow{}}
			s.fold(msgs)
			t := NewTable()
			t.finishReplay([]*foldShard{s}, msgs[len(msgs)-1].seq)
			return t
		}},
		{"table-apply", func(msgs []storedMsg) *Table {
			t := NewTable()
			for _, m := range msgs {
				e, err := events.DecodeStored(m.data, m.subject, m.seq)
				if err == nil {
					_, err = t.Apply(e)
				}
				if err != nil {
					b.Fatal(err)
				}
			}
			return t
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			cpu0 := cpuTime()
			for b.Loop() {
				if t := c.fold(msgs); len(t.rows) != 2000 {
					b.Fatalf("%d rows", len(t.rows))
				}
			}
			b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(b.N*len(msgs)), "cpu-ns/ev")
			b.ReportMetric(float64(b.N*len(msgs))/b.Elapsed().Seconds(), "events/s")
		})
	}
}

// BenchmarkReplayFoldRecorded is a replay's fold alone, on one core, of every recorded
// history (events/testdata/replay): real events, signed, with the large submitted and
// incarnated payloads the bench's pipeline writes (a job's description, the rendered
// scripts), which replayLog's lives do not have, written as Store writes them today (the
// recordings hold the data in base64, as bodies were written then). Each iteration
// folds them into a fresh shard.
func BenchmarkReplayFoldRecorded(b *testing.B) {
	fs, err := eventstest.LoadFixtures(filepath.Join("..", "..", "events", filepath.FromSlash(eventstest.ReplayDir)))
	if err != nil {
		b.Fatal(err)
	}
	var msgs []storedMsg
	for _, f := range fs {
		for _, e := range f.Events {
			body, err := e.Encode()
			if err != nil {
				b.Fatal(err)
			}
			msgs = append(msgs, storedMsg{data: body, subject: e.Subject, seq: e.Seq})
		}
	}
	b.ReportAllocs()
	cpu0 := cpuTime()
	for b.Loop() {
		s := &foldShard{rows: map[string]*foldingRow{}}
		s.fold(msgs)
		t := NewTable()
		t.finishReplay([]*foldShard{s}, 0)
		if len(t.rows) == 0 {
			b.Fatal("no rows")
		}
	}
	b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(b.N*len(msgs)), "cpu-ns/ev")
	b.ReportMetric(float64(b.N*len(msgs))/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkReduce reduces every recorded submitted and incarnated payload to the fields a
// row keeps, checking what it skips (a payload the decoder did not check: data_base64,
// or the live projection's) and skipping it (one the decoder checked as JSON).
func BenchmarkReduce(b *testing.B) {
	fs, err := eventstest.LoadFixtures(filepath.Join("..", "..", "events", filepath.FromSlash(eventstest.ReplayDir)))
	if err != nil {
		b.Fatal(err)
	}
	var evs []events.Event
	size := 0
	for _, f := range fs {
		for _, e := range f.Events {
			if keptFields(e.Name) != nil {
				evs, size = append(evs, e), size+len(e.Data)
			}
		}
	}
	for _, checked := range []bool{false, true} {
		b.Run(map[bool]string{false: "check", true: "skip"}[checked], func(b *testing.B) {
			b.SetBytes(int64(size))
			for b.Loop() {
				for _, e := range evs {
					if _, ok := reduce(e.Data, keptFields(e.Name), checked); !ok {
						b.Fatalf("not reduced: %s", e.Data)
					}
				}
			}
		})
	}
}
