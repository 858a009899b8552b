package ptp

import (
	"fmt"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/events/eventstest"
)

// The model folds each event into the state it kept of the job (keep); every view it shows, event after
// event, is the view of the whole fold, and so is every refusal: on the recorded
// histories (groups, DDS sessions, restarts, holds, stage-outs, directory removals) and
// on scripted lives.
func TestLeanFoldShowsTheWholeFoldsViews(t *testing.T) {
	fs, err := eventstest.LoadFixtures(filepath.Join("..", "..", "..", "events", filepath.FromSlash(eventstest.ReplayDir)))
	if err != nil {
		t.Fatal(err)
	}
	histories := map[string][]events.Event{}
	for _, f := range fs {
		histories[f.Name] = f.Events
	}
	var lives []events.Event
	for i := range 6 {
		id := events.NewID()
		for k, s := range eventstest.Life(id, fmt.Sprintf("c%d", i%2), i) {
			e, err := events.New(id, s.Name, s.Route, time.Unix(int64(1000+k), 0).UTC(), s.Payload)
			if err != nil {
				t.Fatal(err)
			}
			e.Seq = uint64(len(lives) + 1)
			lives = append(lives, e)
		}
	}
	histories["lives"] = lives
	leaned := 0
	for name, evs := range histories {
		whole, thin := map[string]events.State{}, map[string]kept{}
		var scratch events.Job
		for _, e := range evs {
			w, werr := events.Apply(whole[e.JobID], e)
			l, lerr := events.Apply(thin[e.JobID].state(&scratch), e)
			if (werr == nil) != (lerr == nil) {
				t.Fatalf("%s: seq %d (%s): whole fold %v, lean fold %v", name, e.Seq, e.Name, werr, lerr)
			}
			if werr != nil {
				continue
			}
			k := keep(l)
			if k.hasJob {
				leaned++
			}
			var j events.Job
			wv, wok := viewOf(w)
			lv, lok := viewOf(k.state(&j))
			if d := cmp.Diff(wv, lv); d != "" || wok != lok {
				t.Fatalf("%s: seq %d (%s): views differ (-whole +lean), shown %v/%v:\n%s", name, e.Seq, e.Name, wok, lok, d)
			}
			whole[e.JobID], thin[e.JobID] = w, k
		}
	}
	if leaned == 0 {
		t.Fatal("no state was made lean")
	}
}

// BenchmarkModelStateBytesPerJob is the heap the model's states hold per job of the
// bench's kind (eventstest.Life), kept whole (whole=true) and as the model keeps them
// (whole=false).
//
//	cd services/readside/ptp && go test -run '^$' -bench ModelStateBytesPerJob -benchtime 1x .
func BenchmarkModelStateBytesPerJob(b *testing.B) {
	const jobs = 20_000
	for _, keepWhole := range []bool{true, false} {
		b.Run(fmt.Sprintf("whole=%v", keepWhole), func(b *testing.B) {
			for b.Loop() {
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				states := make(map[string]any, jobs)
				var scratch events.Job
				for i := range jobs {
					id := events.NewID()
					var st events.State
					var kp kept
					for k, s := range eventstest.Life(id, "c", i) {
						e, err := events.New(id, s.Name, s.Route, time.Unix(int64(1000+k), 0).UTC(), s.Payload)
						if err != nil {
							b.Fatal(err)
						}
						e.Source = "bench"
						body, err := e.Encode()
						if err != nil {
							b.Fatal(err)
						}
						stored, err := events.DecodeStored(body, events.Subject(id, e.Name, e.Route), uint64(k+1))
						if err != nil {
							b.Fatal(err)
						}
						from := st
						if !keepWhole {
							from = kp.state(&scratch)
						}
						next, err := events.Apply(from, stored)
						if err != nil {
							b.Fatal(err)
						}
						st, kp = next, keep(next)
					}
					if keepWhole {
						states[id] = st
					} else {
						states[id] = kp
					}
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
				b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/jobs, "heap-B/job")
				runtime.KeepAlive(states)
			}
		})
	}
}
