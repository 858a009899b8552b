package executor

import (
	"context"
	"log/slog"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/pkg/target"
)

// startingTarget is what these tests gate: a target that starts, controls and finds runs.
type startingTarget interface {
	Target
	Controller
	RunFinder
}

// gatedTarget is a target whose Start waits at a gate (before or after it starts the
// job): the test decides what happens in the log while a start is on its way.
type gatedTarget struct {
	startingTarget
	after   bool          // wait after the target started the job, not before
	entered chan struct{} // Start reached the gate
	gate    chan struct{} // closed: Start goes on
	run     chan events.StartedData
}

func gate(tg startingTarget, after bool) *gatedTarget {
	return &gatedTarget{startingTarget: tg, after: after, entered: make(chan struct{}, 1),
		gate: make(chan struct{}), run: make(chan events.StartedData, 1)}
}

func (g *gatedTarget) Start(ctx context.Context, st events.State) (events.StartedData, error) {
	if !g.after {
		g.entered <- struct{}{}
		<-g.gate
	}
	run, err := g.startingTarget.Start(ctx, st)
	if err == nil {
		g.run <- run
	}
	if g.after {
		g.entered <- struct{}{}
		<-g.gate
	}
	return run, err
}

// killOnCleanup ends a run a failing test left behind.
func killOnCleanup(t *testing.T, pid string) {
	t.Cleanup(func() {
		if n, err := strconv.Atoi(pid); err == nil && n > 1 {
			_ = syscall.Kill(-n, syscall.SIGKILL)
			_ = syscall.Kill(n, syscall.SIGKILL)
		}
	})
}

// The targets a cancel can meet half way: the fork LRMS (ForkTarget) and a profile's
// START (ScriptTarget, here on this host with the fork profile's START and ABORT).
func halfWayTargets() map[string]func() startingTarget {
	return map[string]func() startingTarget{
		"fork":   func() startingTarget { return &ForkTarget{Cluster: "local"} },
		"script": func() startingTarget { return &ScriptTarget{Cluster: "local", Shells: []Shell{target.Local{}}} },
	}
}

// A cancel that meets a start half way, across two attempts: while one attempt is about
// to start the job (an executor cut off from NATS for longer than the ack wait goes on
// starting), the redelivered job is taken by a second attempt, which finds the cancel
// request and no run yet and ends the job CANCELLED before it started. The first
// attempt then starts the process; its started event is refused (the job ended), so it
// aborts the run it made: the log says CANCELLED and nothing runs. Before, the process
// ran on under a CANCELLED job.
func TestCancelMeetingAStartHalfWayLeavesNothingRunning(t *testing.T) {
	for name, newTarget := range halfWayTargets() {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			plain := newTarget()
			tg := gate(newTarget(), false)
			deps := Deps{Store: e.store, Now: time.Now}
			log := slog.New(slog.NewTextHandler(testWriter{t}, nil))
			x := &executor{cfg: Config{Cluster: localCluster(), ID: "x1"}, deps: deps, log: log, target: tg, ctl: tg}
			other := &executor{cfg: x.cfg, deps: deps, log: log, target: plain, ctl: plain}
			id := e.queue(newForkJob(t, "sleep 30"))
			h, err := e.store.Load(context.Background(), id)
			if err != nil {
				t.Fatal(err)
			}
			queued := h.Events[len(h.Events)-1]

			first := make(chan error, 1)
			go func() { first <- x.handle(context.Background(), events.Delivery{Event: queued, Delivered: 1}) }()
			<-tg.entered
			if _, err := (ControlAPI{Store: e.store}).Request(context.Background(), id, events.CancelRequested, events.Note{}); err != nil {
				t.Fatal(err)
			}
			if err := other.handle(context.Background(), events.Delivery{Event: queued, Delivered: 2}); err != nil {
				t.Fatal(err)
			}
			if st := e.mustState(id); st.Status != events.StatusCancelled || st.NativeID != "" {
				t.Fatalf("after the second attempt: %s, native ID %q; want CANCELLED before it started", st.Status, st.NativeID)
			}
			close(tg.gate)
			run := <-tg.run
			killOnCleanup(t, run.NativeID)
			if err := <-first; err != nil {
				t.Fatalf("the first attempt: %v", err)
			}
			waitProc(t, run.NativeID, "")
			if st := e.mustState(id); st.Status != events.StatusCancelled || st.NativeID != "" {
				t.Errorf("%s, native ID %q; want CANCELLED before it started", st.Status, st.NativeID)
			}
		})
	}
}

// A redelivery of a job that ended before its run was recorded, whose earlier attempt
// could not abort the run it started, finds that run and aborts it.
func TestRedeliveryAbortsARunLeftByAnEndedJob(t *testing.T) {
	e := newEnv(t)
	fork := &ForkTarget{Cluster: "local"}
	x := &executor{cfg: Config{Cluster: localCluster(), ID: "x1"}, deps: Deps{Store: e.store, Now: time.Now},
		log: slog.New(slog.NewTextHandler(testWriter{t}, nil)), target: fork, ctl: fork}
	id := e.queue(newForkJob(t, "sleep 30"))
	h, err := e.store.Load(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	queued := h.Events[len(h.Events)-1]
	run, err := fork.Start(context.Background(), e.mustState(id)) // the attempt whose ABORT failed
	if err != nil {
		t.Fatal(err)
	}
	killOnCleanup(t, run.NativeID)
	e.append(id, events.Cancelled, "", events.EndData{Reason: "cancelled before it started"})
	if err := x.handle(context.Background(), events.Delivery{Event: queued, Delivered: 2}); err != nil {
		t.Fatal(err)
	}
	waitProc(t, run.NativeID, "")
}

// A cancel that meets a start half way in one attempt, through the executor's own
// consumers: the request arrives (and its delivery is handled and acknowledged, finding
// no native ID) before the start is recorded, once before the process exists and once
// after it was spawned. Either way the job ends CANCELLED and its process is gone.
func TestCancelDuringAStartEndsTheRun(t *testing.T) {
	for name, newTarget := range halfWayTargets() {
		for _, after := range []bool{false, true} {
			t.Run(name+"/after-spawn="+strconv.FormatBool(after), func(t *testing.T) {
				e := newEnv(t)
				tg := gate(newTarget(), after)
				e.run(Config{Cluster: localCluster(), ID: "x1"}, tg)
				id := e.queue(newForkJob(t, "sleep 30"))
				<-tg.entered
				if _, err := (ControlAPI{Store: e.store}).Request(context.Background(), id, events.CancelRequested, events.Note{}); err != nil {
					t.Fatal(err)
				}
				e.waitControlAcked(1)
				if st := e.mustState(id); st.Status != events.StatusQueued || st.NativeID != "" {
					t.Fatalf("%s, native ID %q while the start is held; want QUEUED, not started", st.Status, st.NativeID)
				}
				close(tg.gate)
				run := <-tg.run
				killOnCleanup(t, run.NativeID)
				st := e.waitFor(id, "CANCELLED", func(s events.State) bool { return s.Status.Terminal() })
				if st.Status != events.StatusCancelled {
					t.Errorf("%s, want CANCELLED", st.Status)
				}
				waitProc(t, run.NativeID, "")
			})
		}
	}
}

// waitControlAcked waits until the executor's control consumer has acknowledged n
// requests; the bound only keeps a broken test from hanging.
func (e *env) waitControlAcked(n uint64) {
	e.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := e.bus.JS.Consumer(context.Background(), events.Stream, "executor-control-local")
		if err == nil {
			if info, err := c.Info(context.Background()); err == nil && info.AckFloor.Consumer >= n && info.NumAckPending == 0 {
				return
			}
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("the control consumer did not acknowledge %d requests", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
