package executor

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/pkg/shellquote"
)

// Heterogeneous jobs: co-allocated subjobs that were all incarnated on one batch cluster
// whose profile renders START_HETJOB_COMPONENT (the shipped slurm profile) are
// submitted as one job with one component per subjob, so that the batch system starts
// them together. The first subjob of the group (in the parent's order) is the leader:
// its START, composed here (hetStart), writes every follower's JOB script, submits
// every component with one sbatch (each component's options as its own subjob renders
// them, joined by ":"), and then records in each follower's start lock the native ID of
// its component, LEADER+N, as if the follower's own START had printed it. A follower
// never runs START: it waits until its start lock holds a run and adopts it like any
// run an earlier attempt started (FindRun), or fails when the leader ended without
// starting. Everything the followers need is written by the leader's START, which runs
// to its end once begun, so an executor that dies meanwhile leaves nothing half done:
// the leader's next attempt adopts the job's run from its own lock, and the followers
// find theirs.
//
// The job's script (hetBatchScript) runs each subjob's JOB script in its component with
// srun --het-group=N, in the subjob's working directory, in the background, and waits
// for them. Each JOB script writes its own exit status file, which is what the watcher
// goes by (Slurm reports every component RUNNING until all of them have ended): a
// subjob that ends is seen to end at once, and the co-allocation policy applies as to
// any co-allocated subjobs (by default a failing one has its siblings aborted, and the
// ABORT of any component cancels the whole job).

// hetStarter is a Target that can submit a group of co-allocated subjobs as one job.
type hetStarter interface {
	// hetCapable says whether members (the group, leader first) can go as one job.
	hetCapable(members []events.State) bool
	// startHet starts the leader's run, which carries the followers' components.
	startHet(ctx context.Context, members []events.State) (events.StartedData, error)
	RunFinder
}

// hetjobScript is where the leader's START writes the job's script.
const hetjobScript = events.ControlDir + "/hetjob.sh"

// hetGroup is the co-allocation group of st, in the parent's order, with st's own state
// in its place; nil when a sibling is not incarnated yet (coallocate has waited for
// that, so only a job taken out of the store meanwhile).
func (x *executor) hetGroup(ctx context.Context, st events.State) ([]events.State, error) {
	parent, err := x.deps.Store.State(ctx, st.Job.Parent)
	if err != nil {
		return nil, fmt.Errorf("reading parent %s of co-allocated job %s: %w", st.Job.Parent, st.JobID, err)
	}
	if parent.Job == nil {
		return nil, fmt.Errorf("co-allocated job %s: parent %s has no record", st.JobID, st.Job.Parent)
	}
	var members []events.State
	for _, id := range parent.Job.ChildIDs() {
		if id == st.JobID {
			members = append(members, st)
			continue
		}
		s, err := x.deps.Store.State(ctx, id)
		if err != nil {
			return nil, fmt.Errorf("reading sibling %s of job %s: %w", id, st.JobID, err)
		}
		if s.Job == nil || !s.Job.Coallocated() || s.Job.Coallocation.Group != st.Job.Coallocation.Group {
			continue
		}
		if s.Incarnation == nil {
			return nil, nil
		}
		members = append(members, s)
	}
	return members, nil
}

// startInGroup starts st as part of one heterogeneous job with its co-allocated
// siblings when the target can, and reports whether it did (handled): the leader
// submits, a follower adopts its component.
func (x *executor) startInGroup(ctx context.Context, st events.State) (handled bool, err error) {
	hs, ok := x.target.(hetStarter)
	if !ok {
		return false, nil
	}
	members, err := x.hetGroup(ctx, st)
	if err != nil || members == nil || !hs.hetCapable(members) {
		return false, err
	}
	if members[0].JobID == st.JobID {
		run, err := hs.startHet(ctx, members)
		if err != nil {
			return true, fmt.Errorf("starting the heterogeneous job of %s: %w", st.JobID, err)
		}
		return true, x.recordStarted(ctx, st, run)
	}
	return true, x.awaitComponent(ctx, st, members[0].JobID, hs)
}

// awaitComponent waits until the leader's START has recorded this follower's component
// in its start lock, and records it; it fails the follower when the leader ends without
// a run.
func (x *executor) awaitComponent(ctx context.Context, st events.State, leader string, f RunFinder) error {
	for {
		run, found, err := f.FindRun(ctx, st)
		if err != nil && !errors.Is(err, errStartInProgress) {
			return fmt.Errorf("looking for the component of job %s in the heterogeneous job of %s: %w", st.JobID, leader, err)
		}
		if found {
			run.Adopted = false // its own component, submitted by the leader
			return x.recordStarted(ctx, st, run)
		}
		ls, err := x.deps.Store.State(ctx, leader)
		if err != nil {
			return fmt.Errorf("reading the leader %s of co-allocated job %s: %w", leader, st.JobID, err)
		}
		if ls.Status.Terminal() && ls.NativeID == "" {
			reason := fmt.Sprintf("co-allocated subjob %s, which submits the heterogeneous job, %s before the subjobs started", leader, ls.Status)
			if ls.Reason != "" {
				reason += ": " + ls.Reason
			}
			_, err := x.deps.Store.DecideFrom(ctx, st, func(s events.State) ([]events.Event, error) {
				if s.Status != events.StatusQueued || s.NativeID != "" {
					return nil, nil
				}
				e, err := events.New(s.JobID, events.Failed, "", x.deps.Now(), events.EndData{Reason: reason})
				return []events.Event{e}, err
			})
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(siblingPoll):
		}
	}
}

// hetCapable implements hetStarter: a batch target, every member incarnated on this
// cluster by a profile with START_HETJOB_COMPONENT, all on one host.
func (s *ScriptTarget) hetCapable(members []events.State) bool {
	if !s.Batch || len(members) < 2 {
		return false
	}
	host := s.shellFor(members[0]).Host()
	for _, m := range members {
		inc := m.Incarnation
		if inc == nil || inc.Cluster != s.Cluster || !strings.HasPrefix(inc.WorkDir, "/") ||
			inc.Scripts[events.ScriptStartComponent].Body == "" || inc.Scripts[events.ScriptJob].Body == "" ||
			s.shellFor(m).Host() != host {
			return false
		}
	}
	return true
}

// startHet implements hetStarter: the leader's start, with hetStart for its START.
func (s *ScriptTarget) startHet(ctx context.Context, members []events.State) (events.StartedData, error) {
	body, err := hetStart(members)
	if err != nil {
		return events.StartedData{}, err
	}
	return s.start(ctx, members[0], body)
}

// hetStart composes the leader's START for the group members (leader first): every
// value a quoted literal, each component's options from its own subjob's
// START_HETJOB_COMPONENT (run with that subjob's GW_JOB_ID and GW_WORKDIR).
func hetStart(members []events.State) (string, error) {
	var b strings.Builder
	b.WriteString("set -f\n")
	wd := make([]string, len(members))
	for i, m := range members {
		wd[i] = m.Incarnation.WorkDir
		for _, v := range []string{m.JobID, wd[i], m.Incarnation.Scripts[events.ScriptJob].Body, m.Incarnation.Scripts[events.ScriptStartComponent].Body} {
			if strings.IndexByte(v, 0) >= 0 {
				return "", fmt.Errorf("job %s: a value %w", m.JobID, errNUL)
			}
		}
	}
	for i, m := range members[1:] {
		dir := shellquote.Quote(wd[i+1] + "/" + events.ControlDir)
		b.WriteString("mkdir -p " + dir + " && printf '%s' " + shellquote.Quote(m.Incarnation.Scripts[events.ScriptJob].Body) +
			" >" + shellquote.Quote(wd[i+1]+"/"+events.ScriptFile) + " || exit 1\n")
	}
	b.WriteString("printf '%s' " + shellquote.Quote(hetBatchScript(wd)) + " >" + shellquote.Quote(wd[0]+"/"+hetjobScript) + " || exit 1\n")
	b.WriteString("set -- --parsable\n")
	for i, m := range members {
		if i > 0 {
			b.WriteString("set -- \"$@\" :\n")
		}
		b.WriteString(events.VarJobID + "=" + shellquote.Quote(m.JobID) + " " + events.VarWorkDir + "=" + shellquote.Quote(wd[i]) + "\n")
		b.WriteString(m.Incarnation.Scripts[events.ScriptStartComponent].Body + "\n")
	}
	b.WriteString(events.VarJobID + "=" + shellquote.Quote(members[0].JobID) + " " + events.VarWorkDir + "=" + shellquote.Quote(wd[0]) + "\n")
	b.WriteString("gw_id=$(TZ=UTC sbatch \"$@\" " + shellquote.Quote(wd[0]+"/"+hetjobScript) + ") || exit $?\n")
	b.WriteString("gw_id=${gw_id%%;*}\ncase $gw_id in '' | *[!0-9]*) printf 'sbatch printed %s, not a job ID\\n' \"$gw_id\" >&2; exit 1 ;; esac\n")
	for i := 1; i < len(members); i++ {
		// The follower's start lock as its own START would leave it: the output, then
		// the status line. Should it not be written, nothing of the job may stay.
		b.WriteString("printf '%s+" + strconv.Itoa(i) + "\\n\\n" + statusLine + "0\\n' \"$gw_id\" >" +
			shellquote.Quote(wd[i]+"/"+startLock) + " || { scancel \"$gw_id\"; exit 1; }\n")
	}
	b.WriteString("printf '%s+0\\n' \"$gw_id\"\n")
	return b.String(), nil
}

// hetBatchScript is the heterogeneous job's script: component N runs the JOB script of
// the subjob in wd[N] there.
func hetBatchScript(wd []string) string {
	var b strings.Builder
	b.WriteString("#!/bin/sh\n# gridwire: one component per co-allocated subjob\n")
	for i, w := range wd {
		b.WriteString("srun --het-group=" + strconv.Itoa(i) + " --ntasks=1 --chdir=" + shellquote.Quote(w) + " /bin/sh " +
			shellquote.Quote(w+"/"+events.ScriptFile) + " &\n")
	}
	b.WriteString("wait\n")
	return b.String()
}
