package ptp

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/pkg/ptpwire"
	"github.com/gridwire/gridwire/services/readside/ptp/ptptest"
)

// BenchmarkSessions: N sessions follow 1,000 jobs from submission to SUCCEEDED, written
// into the log while they watch (16 writers, as the pipeline's services would). Every
// session must see every job's five visible changes once, in order (each a CHANGE_JOB
// and a CHANGE_PROCESS, or the NEW pair). Reported: the time the appends alone took
// (append-s, the yardstick from the same run), the time until the last session had seen
// everything (deliver-s), PTP events delivered per second over all sessions, and the
// endpoint's CPU per delivered event (cpu-ns/event, process CPU over the run divided by
// events, which includes the clients and the NATS server in this process).
func BenchmarkSessions(b *testing.B) {
	for _, n := range []int{1, 100} {
		b.Run(fmt.Sprintf("sessions=%d/jobs=1000", n), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				benchOnce(b, n, 1000)
			}
		})
	}
}

var wantStates = strings.Join([]string{"INCARNATED", "QUEUED", "RUNNING", "STAGING_OUT", "SUCCEEDED"}, " ")

func benchOnce(b *testing.B, sessions, jobs int) {
	b.StopTimer()
	h := newHarness(&testing.T{})
	clients := make([]*ptptest.Client, sessions)
	for i := range clients {
		c, err := ptptest.Dial(h.addr, ptpwire.FormatBinary, "")
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		if err := c.Handshake(wait, uint32(1000+i)); err != nil {
			b.Fatal(err)
		}
		if err := c.Wait(wait, "model", func(c *ptptest.Client) bool { return len(c.Queues) == 2 }); err != nil {
			b.Fatal(err)
		}
		clients[i] = c
	}
	ids := make([]string, jobs)
	for i := range ids {
		ids[i] = events.NewID()
	}
	cpu0 := cpuTime()
	start := time.Now()
	b.StartTimer()
	appendAll(b, h, ids)
	appended := time.Since(start)
	for _, c := range clients {
		err := c.Wait(10*time.Minute, "every job's end", func(c *ptptest.Client) bool { return c.Completed == jobs })
		if err != nil {
			b.Fatal(err)
		}
	}
	delivered := time.Since(start)
	b.StopTimer()
	cpu := cpuTime() - cpu0
	total := 0
	for _, c := range clients {
		c.Snapshot(func(c *ptptest.Client) {
			for _, j := range c.Jobs {
				if got := strings.Join(j.States, " "); got != wantStates {
					b.Fatalf("job %s went through %q, want %q", j.ID, got, wantStates)
				}
			}
			total += c.Events
		})
	}
	b.ReportMetric(appended.Seconds(), "append-s")
	b.ReportMetric(delivered.Seconds(), "deliver-s")
	b.ReportMetric(float64(total)/delivered.Seconds(), "events/s")
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(total), "cpu-ns/event")
}

func appendAll(b *testing.B, h *harness, ids []string) {
	work := make(chan string)
	var wg sync.WaitGroup
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for id := range work {
				lifecycle(b, h, id)
			}
		}()
	}
	for _, id := range ids {
		work <- id
	}
	close(work)
	wg.Wait()
}

func lifecycle(b *testing.B, h *harness, id string) {
	ctx := context.Background()
	j := events.Job{ID: id, Name: "bench", Executable: "/bin/true", Count: 1}
	e, err := events.New(id, events.Submitted, "", time.Now(), j)
	if err == nil {
		_, err = h.store.Create(ctx, e)
	}
	if err != nil {
		b.Error(err)
		return
	}
	code := 0
	for _, s := range []struct {
		name    events.Name
		payload any
	}{
		{events.Incarnated, events.IncarnatedData{Cluster: "local", Queue: "default", Profile: "fork"}},
		{events.Queued, events.QueuedData{Cluster: "local"}},
		{events.Started, events.StartedData{Cluster: "local", Host: "localhost", NativeID: "1", Running: true}},
		{events.Exited, events.ExitedData{ExitCode: 0}},
		{events.StagedOut, events.StagedOutData{OK: true}},
		{events.Succeeded, events.EndData{ExitCode: &code}},
	} {
		_, err := h.store.Decide(ctx, id, func(st events.State) ([]events.Event, error) {
			e, err := events.New(id, s.name, "local", time.Now(), s.payload)
			return []events.Event{e}, err
		})
		if err != nil {
			b.Error(err)
			return
		}
	}
}

func cpuTime() time.Duration {
	var ru runtimeUsage
	ru.read()
	return ru.total
}
