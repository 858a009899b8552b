package executor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/pkg/cluster"
	"github.com/gridwire/gridwire/pkg/target"
	"github.com/nats-io/nats.go"
)

// NewTarget is the target a cluster's kind and profile call for: a fork cluster with a
// fork LRMS runs jobs as detached processes here (ForkTarget); any other fork cluster
// (a batch system whose clients are on this host) and every ssh cluster start jobs
// through the profile's START (ScriptTarget), over one pooled connection per host for
// ssh. The returned func releases the target's connections.
//
// A fork cluster's jobs run as its run_as user; a gateway running as root refuses a
// fork cluster without one unless allow_root is set (runAsOf).
func NewTarget(cl cluster.Cluster, hints *nats.Conn, log *slog.Logger) (Target, func(), error) {
	batch := !strings.EqualFold(cl.LRMS, "fork") && !strings.EqualFold(cl.Profile, "fork")
	var as *RunAs
	if cl.Kind == cluster.KindFork {
		var err error
		if as, err = runAsOf(cl, os.Geteuid()); err != nil {
			return nil, nil, err
		}
	}
	if cl.Kind == cluster.KindFork && !batch {
		return &ForkTarget{Cluster: cl.Name, Hints: hints, Logger: log, RunAs: as}, func() {}, nil
	}
	if as != nil {
		return nil, nil, fmt.Errorf("executor: cluster %s: run_as is for the fork LRMS; a batch system on this host (%s) "+
			"runs jobs as whoever submits them: run the gateway as that user, or set allow_root", cl.Name, cl.LRMS)
	}
	t := &ScriptTarget{Cluster: cl.Name, Batch: batch, Logger: log}
	if cl.Kind == cluster.KindFork {
		t.Shells = []Shell{target.Local{}}
		return t, func() {}, nil
	}
	pool, err := target.NewPool(cl, log)
	if err != nil {
		return nil, nil, err
	}
	for _, h := range cl.Hosts {
		t.Shells = append(t.Shells, target.SSH{Pool: pool, Addr: h})
	}
	return t, func() { _ = pool.Close() }, nil
}

// Control implements Controller: the profile's script, run on this host, after the
// profile's static scripts it may run (a HOLD, RESUME or ABORT written as a static
// script) are installed where the BIN template puts them; an installed one is kept.
func (f *ForkTarget) Control(ctx context.Context, st events.State, script string) (target.Output, error) {
	if st.Incarnation != nil && len(st.Incarnation.StaticScripts) > 0 {
		if err := installLocal(ctx, st.Incarnation.StaticScripts); err != nil {
			return target.Output{}, fmt.Errorf("installing static scripts for job %s: %w", st.JobID, err)
		}
	}
	return runControl(ctx, target.Local{}, st, script, true)
}

// installLocal writes the static scripts this host lacks (target.InstallScript).
func installLocal(ctx context.Context, statics map[string]events.Script) error {
	list := make([]target.Static, 0, len(statics))
	for name, sc := range statics {
		list = append(list, target.Static{Name: name, Location: sc.Location, Body: sc.Body})
	}
	script, err := target.InstallScript(list)
	if err != nil {
		return err
	}
	out, err := target.Local{}.Feed(ctx, "{\nexec </dev/null\n"+script+"}\n")
	if err != nil {
		return err
	}
	if !out.OK() {
		return errors.New(out.Describe())
	}
	return nil
}

// action is what a job's requests ask of the target now.
type action struct {
	script string      // ABORT, HOLD or RESUME
	done   events.Name // recorded when the script succeeded
}

// pending is the request the job's state still asks for: the fold keeps the latest
// wish (a resume cancels a hold not yet carried out), and clears it once recorded. A
// job not started yet has none: the services before the executor, and the executor
// when it starts the job, carry those out.
func pending(st events.State) (action, bool) {
	onTarget := st.Status == events.StatusQueued || st.Status == events.StatusRunning || st.Status == events.StatusHeld
	switch {
	case !onTarget || st.NativeID == "":
		return action{}, false
	case st.CancelRequested:
		return action{events.ScriptAbort, events.Cancelled}, true
	case st.HoldRequested && st.Status != events.StatusHeld:
		return action{events.ScriptHold, events.Held}, true
	case st.ResumeRequested && st.Status == events.StatusHeld:
		return action{events.ScriptResume, events.Resumed}, true
	}
	return action{}, false
}

// control handles one request event; the job's folded state says what is left to do.
func (x *executor) control(ctx context.Context, d events.Delivery) error {
	st, err := x.deps.Store.StateAt(ctx, d.Event)
	if err != nil {
		return err
	}
	var n events.Note
	if d.Event.Name != events.CancelRequested || d.Event.Payload(&n) != nil {
		n = events.Note{}
	}
	return x.actFor(ctx, st, n)
}

// act carries out the request the job's state holds, if any, and records the result:
// cancelled, held or resumed, or action_failed with the script's output.
func (x *executor) act(ctx context.Context, st events.State) error {
	return x.actFor(ctx, st, events.Note{})
}

// actFor is act with the cancel request's note: its reason is kept on the cancelled
// event (a co-allocated subjob ended because its sibling failed says which and why), and
// a request for a job past its start deadline (events.CancelStartDeadline) ends it
// FAILED with that reason.
func (x *executor) actFor(ctx context.Context, st events.State, req events.Note) error {
	a, ok := pending(st)
	if !ok {
		return nil
	}
	out, err := x.ctl.Control(ctx, st, a.script)
	if err != nil {
		return fmt.Errorf("running %s for job %s: %w", a.script, st.JobID, err)
	}
	_, err = x.deps.Store.DecideFrom(ctx, st, func(s events.State) ([]events.Event, error) {
		if b, ok := pending(s); !ok || b != a {
			return nil, nil // the job ended or the wish changed while the script ran
		}
		if !out.OK() {
			return x.actionFailed(s.JobID, a.script, out.Describe(), string(out.Stdout))
		}
		var payload any = events.Note{Action: a.script, Output: strings.TrimSpace(string(out.Stdout))}
		done := a.done
		switch {
		case a.done == events.Cancelled && req.Action == events.CancelStartDeadline:
			done, payload = events.Failed, events.EndData{Reason: req.Reason}
		case a.done == events.Cancelled && req.Reason != "":
			payload = events.EndData{Reason: "cancelled on request: " + req.Reason}
		case a.done == events.Cancelled:
			payload = events.EndData{Reason: "cancelled on request"}
		}
		e, err := events.New(s.JobID, done, x.cfg.Cluster.Name, x.deps.Now(), payload)
		return []events.Event{e}, err
	})
	if err == nil {
		x.log.Info("request carried out", "job", st.JobID, "action", a.script, "ok", out.OK())
	}
	return err
}

func (x *executor) actionFailed(jobID, script, reason, output string) ([]events.Event, error) {
	e, err := events.New(jobID, events.ActionFailed, x.cfg.Cluster.Name, x.deps.Now(),
		events.Note{Action: script, Reason: reason, Output: output})
	return []events.Event{e}, err
}

// controlExhausted records a request whose script could never be run.
func (x *executor) controlExhausted(ctx context.Context, d events.Delivery, cause error) {
	st, err := x.deps.Store.StateAt(ctx, d.Event)
	if err == nil {
		_, err = x.deps.Store.DecideFrom(ctx, st, func(s events.State) ([]events.Event, error) {
			a, ok := pending(s)
			if !ok {
				return nil, nil
			}
			return x.actionFailed(s.JobID, a.script, fmt.Sprintf("could not run %s on %s after %d attempts: %v",
				a.script, x.cfg.Cluster.Name, d.Delivered, cause), "")
		})
	}
	if err != nil {
		x.log.Error("recording an exhausted request", "job", d.Event.JobID, "err", err)
	}
}
