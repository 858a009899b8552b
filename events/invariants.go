package events

import (
	"fmt"
	"slices"
)

// Invariants is what a whole log must satisfy however its writers failed: the checks of
// `gridwire audit invariants`, run at the end of every fault test. Each count is a number
// of jobs (or of cells) that break the named rule; all zero means the log is sound.
type Invariants struct {
	Jobs   int `json:"jobs"`   // jobs in the log
	Events int `json:"events"` // events read

	Lost       int `json:"lost"`       // acknowledged submissions with no history
	Duplicated int `json:"duplicated"` // jobs no acknowledged submission names, or one key twice
	Stuck      int `json:"stuck"`      // jobs not ended
	Illegal    int `json:"illegal"`    // histories the fold refuses (not a path of the state machine)
	Terminals  int `json:"terminals"`  // jobs with more than one terminal event in one attempt
	After      int `json:"after"`      // jobs with an event after their terminal one (but a restart or the attempt's directory_deleted)
	RunTwice   int `json:"run_twice"`  // jobs started more than once in one attempt (two runs at once)
	// Properties counts property sets their writer's declaration does not allow (not a
	// task of the session, the key not declared writable, another scope or collection).
	Properties int `json:"properties"`

	// Problems names each job that broke a rule and how, for the operator.
	Problems []string `json:"problems,omitempty"`
}

// OK reports whether every invariant holds.
func (r Invariants) OK() bool {
	return r.Lost+r.Duplicated+r.Stuck+r.Illegal+r.Terminals+r.After+r.RunTwice+r.Properties == 0
}

// CheckInvariants checks the histories of every job in a log (each in stream order).
// expected, when not nil, lists the job IDs whose submission was acknowledged to a
// client: each must have a history, and no other job may exist.
func CheckInvariants(histories map[string][]Event, expected []string) Invariants {
	r := Invariants{Jobs: len(histories)}
	ids := make([]string, 0, len(histories))
	for id := range histories {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		r.checkJob(id, histories[id])
		r.checkProperties(id, histories)
	}
	if expected != nil {
		want := make(map[string]bool, len(expected))
		for _, id := range expected {
			if want[id] {
				continue
			}
			want[id] = true
			if len(histories[id]) == 0 {
				r.Lost++
				r.problem("job %s: acknowledged, but not in the log", id)
			}
		}
		for _, id := range ids {
			if !want[id] {
				r.Duplicated++
				r.problem("job %s: in the log, but no acknowledged submission names it", id)
			}
		}
	}
	return r
}

func (r *Invariants) checkJob(id string, evs []Event) {
	r.Events += len(evs)
	var st State
	terminals, started, after, refused := 0, 0, false, false
	for _, e := range evs {
		if e.Name == Restarted && !refused && st.Restartable() {
			// A new attempt: it has a start and an end of its own.
			terminals, started = 0, 0
		}
		// The attempt's one directory_deleted is housekeeping after the end, not an
		// event after it; a second one, or one the fold refuses, is.
		housekeeping := e.Name == DirectoryDeleted && !refused && st.Status.Terminal() && st.DirectoryDeleted == nil
		if terminals > 0 && !housekeeping {
			after = true
		}
		if e.Name.Terminal() {
			terminals++
		}
		if e.Name == Started {
			started++
		}
		if refused {
			continue
		}
		next, err := Apply(st, e)
		if err != nil {
			refused = true
			// An event after the end is counted as such below, not twice.
			if !st.Status.Terminal() || housekeeping {
				r.Illegal++
				r.problem("job %s: seq %d %s refused: %v", id, e.Seq, e.Name, err)
			}
			continue
		}
		st = next
	}
	switch {
	case terminals > 1:
		r.Terminals++
		r.problem("job %s: %d terminal events", id, terminals)
	case after:
		r.After++
		r.problem("job %s: events after its terminal one", id)
	}
	if started > 1 {
		r.RunTwice++
		r.problem("job %s: started %d times", id, started)
	}
	// A group's state is derived from its children's histories, not ended by its own.
	if !st.Status.Terminal() && (st.Job == nil || st.Job.Kind != KindGroup) {
		r.Stuck++
		r.problem("job %s: stuck at %s", id, st.Status)
	}
}

// checkProperties checks each property set in a session's history against its writer's
// declaration, as the task-side API checked it before the append.
func (r *Invariants) checkProperties(session string, histories map[string][]Event) {
	for _, e := range histories[session] {
		if e.Name != PropertySet {
			continue
		}
		var d PropertySetData
		if err := e.Payload(&d); err != nil {
			continue // the fold refuses it: counted as illegal
		}
		if why := writerRefuses(session, d, histories[d.Task]); why != "" {
			r.Properties++
			r.problem("job %s: seq %d property_set %q by %s: %s", session, e.Seq, d.Key, d.Task, why)
		}
	}
}

// writerRefuses says why the writer's own history does not allow the property set d.
func writerRefuses(session string, d PropertySetData, writer []Event) string {
	if len(writer) == 0 || writer[0].Name != Submitted {
		return "the writer has no history"
	}
	var j Job
	if err := writer[0].Payload(&j); err != nil {
		return err.Error()
	}
	if j.Parent != session {
		return "the writer is not a task of this session"
	}
	want, err := PropertyWrite(&j, d.Key, d.Value)
	switch {
	case err != nil:
		return err.Error()
	case want.Scope != d.Scope || want.Collection != d.Collection:
		return fmt.Sprintf("recorded scope %s %s, declared %s %s", d.Scope, d.Collection, want.Scope, want.Collection)
	}
	return ""
}

func (r *Invariants) problem(format string, args ...any) {
	if len(r.Problems) < 1000 {
		r.Problems = append(r.Problems, fmt.Sprintf(format, args...))
	}
}

// ValidJobID reports whether id has the form of a job ID (a ULID).
func ValidJobID(id string) bool { return validJobID(id) }
