package events

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// A parent record (Job.Kind == KindGroup: a JRDL document of several jobs, a DDS
// topology) never runs. Its state is derived from its children's: GroupOf computes what
// it should be from their folded states, and one service (the watcher) appends the
// difference to the parent's own subject as status_changed (RUNNING, HELD) and a terminal
// event, each carrying a GroupSummary. The fold below accepts only those, and the
// requests a user may make of a group.

// GroupSummary counts a parent record's children by state.
type GroupSummary struct {
	Children int            `json:"children"`
	Counts   map[Status]int `json:"counts,omitempty"`
}

// String is the summary as people read it: "3 children: 2 SUCCEEDED, 1 FAILED",
// "1 child: 1 RUNNING", "no children".
func (g GroupSummary) String() string {
	var parts []string
	for _, st := range slices.Sorted(maps.Keys(g.Counts)) {
		if g.Counts[st] != 0 {
			parts = append(parts, fmt.Sprintf("%d %s", g.Counts[st], st))
		}
	}
	switch {
	case g.Children == 0 && len(parts) == 0:
		return "no children"
	case g.Children == 1:
		return "1 child: " + strings.Join(parts, ", ")
	}
	return fmt.Sprintf("%d children: %s", g.Children, strings.Join(parts, ", "))
}

// GroupVerdict is what a parent record's state should be, given its children's.
type GroupVerdict struct {
	Status  Status       // SUBMITTED (nothing ran yet), RUNNING, HELD or a terminal state
	Summary GroupSummary // the children's counts
	Reason  string       // for FAILED and CANCELLED: how many, and the first child's reason
}

// GroupOf derives a parent record's state from its children's folded states, in the
// parent's order: terminal once every child is (SUCCEEDED only if all did, else FAILED
// if any failed, else CANCELLED); HELD while every child still going is held; RUNNING
// once any child has started or ended; SUBMITTED before that. A parent with no children
// (a DDS topology whose main starts no task, which DDS accepts) has nothing left to do:
// it succeeds. It is pure.
func GroupOf(children []State) GroupVerdict {
	v := GroupVerdict{Summary: GroupSummary{Children: len(children), Counts: map[Status]int{}}}
	ended, held, started := 0, 0, false
	var firstFailed, firstCancelled *State
	for i := range children {
		c := &children[i]
		st := c.Status
		if st == StatusNone || c.Restartable() {
			// A child whose submitted event is not read yet, or one that crashed and is
			// about to run again (its restarted event begins a new attempt).
			st = StatusSubmitted
		}
		v.Summary.Counts[st]++
		switch {
		case st.Terminal():
			ended++
			if st == StatusFailed && firstFailed == nil {
				firstFailed = c
			}
			if st == StatusCancelled && firstCancelled == nil {
				firstCancelled = c
			}
		case st == StatusHeld:
			held++
		}
		if st.Terminal() || !c.StartedAt.IsZero() || c.NativeID != "" {
			started = true
		}
	}
	switch {
	case ended == len(children):
		v.Status = StatusSucceeded
		if firstFailed != nil {
			v.Status, v.Reason = StatusFailed, childReason(v.Summary.Counts[StatusFailed], len(children), "failed", firstFailed)
		} else if firstCancelled != nil {
			v.Status, v.Reason = StatusCancelled, childReason(v.Summary.Counts[StatusCancelled], len(children), "cancelled", firstCancelled)
		}
	case held > 0 && held == len(children)-ended:
		v.Status = StatusHeld
	case started:
		v.Status = StatusRunning
	default:
		v.Status = StatusSubmitted
	}
	return v
}

func childReason(n, of int, what string, c *State) string {
	r := fmt.Sprintf("%d of %d children %s; first: %s", n, of, what, c.JobID)
	if c.Reason != "" {
		r += ": " + c.Reason
	}
	return r
}

// GroupEvent is the event that moves a parent record from its folded state to the
// verdict, or "" when it is already there (or the verdict is SUBMITTED, where it starts).
func GroupEvent(parent State, v GroupVerdict) (Name, any) {
	sum := v.Summary
	switch {
	case parent.Status.Terminal() || v.Status == parent.Status || v.Status == StatusSubmitted:
		return "", nil
	case v.Status == StatusSucceeded:
		return Succeeded, EndData{Group: &sum}
	case v.Status == StatusFailed:
		return Failed, EndData{Reason: v.Reason, Group: &sum}
	case v.Status == StatusCancelled:
		return Cancelled, EndData{Reason: v.Reason, Group: &sum}
	}
	return StatusChanged, StatusData{State: v.Status, Group: &sum}
}

// groupStep applies one event type's transition to a parent record, as step does for
// any other job.
func groupStep(s *State, e *Event) error {
	switch e.Name {
	case StatusChanged:
		return applyGroupStatus(s, e)
	case Succeeded, Failed, Cancelled:
		return applyGroupEnd(s, e)
	case CancelRequested, HoldRequested, ResumeRequested, ActionFailed:
		_, err := step(s, e)
		return err
	case SessionUpdated:
		return applySessionUpdated(s, e)
	case Submitted:
		return applySubmitted(s, e)
	case PropertySet:
		return applyPropertySet(s, e)
	}
	return illegal(s, e, "a parent record never runs; its state follows its children")
}

func applyGroupStatus(s *State, e *Event) error {
	var d StatusData
	if err := e.Payload(&d); err != nil {
		return err
	}
	if d.State != StatusRunning && d.State != StatusHeld {
		return illegal(s, e, "a parent record's status_changed names RUNNING or HELD, not "+string(d.State))
	}
	if d.Group == nil {
		return illegal(s, e, "a parent record's status_changed carries its children's summary")
	}
	switch d.State {
	case StatusHeld:
		s.HoldRequested = false
	case StatusRunning:
		s.ResumeRequested = false
	}
	if s.StartedAt.IsZero() {
		s.StartedAt = e.Time
	}
	s.Status, s.Group = d.State, d.Group
	return nil
}

func applyGroupEnd(s *State, e *Event) error {
	var d EndData
	if err := e.Payload(&d); err != nil {
		return err
	}
	if d.Group == nil {
		return illegal(s, e, "a parent record ends with its children's summary")
	}
	if e.Name == Succeeded && d.Group.Counts[StatusSucceeded] != d.Group.Children {
		return illegal(s, e, "a parent record succeeds only when every child did ("+d.Group.String()+")")
	}
	to := map[Name]Status{Succeeded: StatusSucceeded, Failed: StatusFailed, Cancelled: StatusCancelled}[e.Name]
	s.Status, s.Reason, s.Group = to, d.Reason, d.Group
	return nil
}

// Coallocation policies: what happens to the other subjobs of a job when one ends
// without succeeding while they run.
const (
	// SiblingsAbort (the default, "") ends them: a co-allocated job runs as one.
	SiblingsAbort = "abort"
	// SiblingsContinue lets them run on; they still start together.
	SiblingsContinue = "continue"
)

// Coallocated reports whether the job must start together with siblings.
func (j *Job) Coallocated() bool {
	return j != nil && j.Parent != "" && j.Coallocation != nil && j.Coallocation.Size > 1
}

// Siblings returns the IDs, among a parent's children (given as folded states), of the
// jobs co-allocated with j, j excluded.
func Siblings(j *Job, children []State) []string {
	if !j.Coallocated() {
		return nil
	}
	var ids []string
	for _, c := range children {
		if c.Job != nil && c.JobID != j.ID && c.Job.Coallocated() && c.Job.Coallocation.Group == j.Coallocation.Group {
			ids = append(ids, c.JobID)
		}
	}
	return ids
}

// applySessionUpdated changes a session's children: the removed leave it, the added join
// it at the end. The parent's job is copied, never changed in place. (A projection that
// keeps no children, such as the job table, folds it too, so a removed job the state
// does not list is no error.)
func applySessionUpdated(s *State, e *Event) error {
	var d SessionUpdateData
	if err := e.Payload(&d); err != nil {
		return err
	}
	gone := make(map[string]bool, len(d.Removed))
	for _, id := range d.Removed {
		gone[id] = true
	}
	j := *s.Job
	before := s.Job.ChildIDs()
	j.ChildRange = nil
	j.Children = make([]string, 0, max(0, len(before)-len(d.Removed))+len(d.Added))
	for _, id := range before {
		if !gone[id] {
			j.Children = append(j.Children, id)
		}
	}
	for _, id := range d.Added {
		if slices.Contains(before, id) {
			return illegal(s, e, "session_updated adds "+id+", already a child")
		}
	}
	j.Children = append(j.Children, d.Added...)
	s.Job = &j
	return nil
}
