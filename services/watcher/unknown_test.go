package watcher

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/events/eventstest"
	"github.com/gridwire/gridwire/pkg/bus"
	"github.com/gridwire/gridwire/pkg/cluster"
)

// flakyProber is a target that cannot be asked while down, then answers with the given
// observation for every job.
type flakyProber struct {
	down  atomic.Bool
	calls atomic.Int64
	obs   atomic.Value // Observation
}

func (p *flakyProber) Probe(_ context.Context, jobs []Watched) (map[string]Observation, error) {
	p.calls.Add(1)
	if p.down.Load() {
		return nil, errors.New("ssh: connect to host hpc1: connection refused")
	}
	o, _ := p.obs.Load().(Observation)
	out := map[string]Observation{}
	for _, w := range jobs {
		out[w.JobID] = o
	}
	return out, nil
}

// runWatcher runs the watcher on one ssh cluster, hpc1, observed through p, polling
// fast; the returned func stops it and checks it stopped cleanly.
func runWatcher(t *testing.T, b *bus.Bus, st *events.Store, p Prober) func() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	cfg := Config{Clusters: []cluster.Cluster{{Name: "hpc1", Kind: cluster.KindSSH}},
		PollMin: 5 * time.Millisecond, PollMax: 20 * time.Millisecond}
	go func() {
		done <- Run(ctx, cfg, Deps{JS: b.JS, Conn: b.Conn, Store: st, Logger: slog.New(slog.DiscardHandler),
			Probers: map[string]Prober{"hpc1": p}})
	}()
	return func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("watcher: %v", err)
		}
	}
}

func names(t *testing.T, st *events.Store, id string) []events.Name {
	return eventstest.Names(t, st, id)
}

func count(ns []events.Name, n events.Name) int { return eventstest.Count(ns, n) }

// A target that fails to answer for a while gets one status_unknown per job, however
// many polls fail, never an invented end; when it answers again, one status_known, and
// the real end is recorded from what it then says.
func TestFailingProberRecordsUnknownThenKnown(t *testing.T) {
	b, st := openBus(t)
	p := &flakyProber{}
	p.down.Store(true)
	p.obs.Store(Observation{State: events.StatusRunning, NativeState: "R"})
	defer runWatcher(t, b, st, p)()
	id := events.NewID()
	play(t, st, id, t0, life(id, "hpc1", 0)[:7]) // started on hpc1
	eventually(t, "status_unknown", func() bool { return count(names(t, st, id), events.StatusUnknown) == 1 })
	polls := p.calls.Load()
	eventually(t, "ten more failed polls", func() bool { return p.calls.Load() >= polls+10 })
	ns := names(t, st, id)
	if count(ns, events.StatusUnknown) != 1 || count(ns, events.Exited) != 0 || count(ns, events.Failed) != 0 {
		t.Fatalf("while the target is down: %v, want one status_unknown and no end", ns)
	}
	stt, _ := st.State(context.Background(), id)
	if stt.Status != events.StatusRunning || !stt.StatusUnknown {
		t.Fatalf("state while down: %s unknown=%v, want RUNNING with status unknown", stt.Status, stt.StatusUnknown)
	}
	p.down.Store(false)
	eventually(t, "status_known", func() bool { return count(names(t, st, id), events.StatusKnown) == 1 })
	p.obs.Store(Observation{Exited: true, ExitCode: 7, NativeState: "COMPLETED"})
	eventually(t, "the exit", func() bool { return count(names(t, st, id), events.Exited) == 1 })
	stt, _ = st.State(context.Background(), id)
	if stt.StatusUnknown || stt.ExitCode == nil || *stt.ExitCode != 7 || stt.NativeState != "COMPLETED" {
		t.Fatalf("after the outage: %+v", stt)
	}
	if ns := names(t, st, id); count(ns, events.StatusUnknown) != 1 || count(ns, events.StatusKnown) != 1 {
		t.Fatalf("history %v, want one status_unknown and one status_known", ns)
	}
}

// A poll answered before a HOLD took effect still says "pending"; it must not take the
// job out of HELD (a RESUME would then find nothing to resume). A job seen running has
// left HELD for real.
func TestStalePendingPollDoesNotUndoAHold(t *testing.T) {
	b, st := openBus(t)
	p := &flakyProber{}
	p.obs.Store(Observation{State: events.StatusQueued, NativeState: "PENDING"})
	defer runWatcher(t, b, st, p)()
	id := events.NewID()
	started := life(id, "hpc1", 0)[:7]
	started[6].Payload = events.StartedData{Cluster: "hpc1", NativeID: "1000", Running: false} // pending in the LRMS
	play(t, st, id, t0, append(started, step{Name: events.Held, Route: "hpc1", Payload: events.Note{Action: "HOLD"}}))
	polls := p.calls.Load()
	eventually(t, "ten polls", func() bool { return p.calls.Load() >= polls+10 })
	if s, _ := st.State(context.Background(), id); s.Status != events.StatusHeld {
		t.Fatalf("a pending poll moved a held job to %s", s.Status)
	}
	p.obs.Store(Observation{State: events.StatusRunning, NativeState: "RUNNING"})
	eventually(t, "RUNNING once the target runs it", func() bool {
		s, _ := st.State(context.Background(), id)
		return s.Status == events.StatusRunning
	})
}
