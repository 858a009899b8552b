package events

import "strconv"

// Name is an event's short name, the third token of its subject.
type Name string

// The events of a job's life. Each name's CloudEvents type is dev.gridwire.job.<name>.v<N>, N its
// Version (1 for every event today).
const (
	Submitted       Name = "submitted"        // ingest: a canonical job was accepted
	Incarnated      Name = "incarnated"       // incarnator: cluster chosen, scripts rendered
	StagingIn       Name = "staging_in"       // stager: stage-in began (the plan)
	Transfer        Name = "transfer"         // stager: one attempt at one file
	Queued          Name = "queued"           // stager: ready for the cluster's executors
	Started         Name = "started"          // executor: START ran, native ID known
	StatusChanged   Name = "status_changed"   // watcher: canonical and/or native state moved
	StatusUnknown   Name = "status_unknown"   // watcher: the target could not be asked
	StatusKnown     Name = "status_known"     // watcher: the target answers again
	Held            Name = "held"             // executor: HOLD ran
	Resumed         Name = "resumed"          // executor: RESUME ran
	Exited          Name = "exited"           // watcher: the program ended with an exit code
	StagedOut       Name = "staged_out"       // stager: stage-out and cleanup are done
	Succeeded       Name = "succeeded"        // terminal
	Failed          Name = "failed"           // terminal
	Cancelled       Name = "cancelled"        // terminal
	CancelRequested Name = "cancel_requested" // a user asked to cancel
	HoldRequested   Name = "hold_requested"   // a user asked to hold
	ResumeRequested Name = "resume_requested" // a user asked to resume
	ActionFailed    Name = "action_failed"    // executor: ABORT/HOLD/RESUME did not work
	PropertySet     Name = "property_set"     // a task of a DDS session set a property (on the session)
	Restarted       Name = "restarted"        // watcher: a crashed job runs again, a new attempt
	SessionUpdated  Name = "session_updated"  // ingest: a session's topology changed: children added, removed
	// DirectoryDeleted is housekeeping after the end: the executor removed the attempt's
	// working directory under its cluster's retention. It follows a terminal event and
	// leaves the job's state terminal (see Apply).
	DirectoryDeleted Name = "directory_deleted"
)

// TypePrefix begins every gridwire CloudEvents type: TypePrefix + name + ".v" + version.
const TypePrefix = "dev.gridwire.job."

// Names lists every known event name.
var names = []Name{Submitted, Incarnated, StagingIn, Transfer, Queued, Started, StatusChanged,
	StatusUnknown, StatusKnown, Held, Resumed, Exited, StagedOut, Succeeded, Failed, Cancelled,
	CancelRequested, HoldRequested, ResumeRequested, ActionFailed, PropertySet, Restarted, SessionUpdated, DirectoryDeleted}

// Names returns every known event name, in life order.
func Names() []Name { return append([]Name(nil), names...) }

// Type is the CloudEvents type of the name at the version this build writes.
func (n Name) Type() string { return TypePrefix + string(n) + ".v" + strconv.Itoa(n.Version()) }

// Known reports whether n is an event gridwire defines.
func (n Name) Known() bool {
	for _, k := range names {
		if k == n {
			return true
		}
	}
	return false
}

// NameOfType turns a CloudEvents type back into a Name, "" if it is not gridwire's (of
// any version: see ParseType).
func NameOfType(t string) Name {
	n, _, _ := ParseType(t)
	return n
}

// Terminal reports whether the event ends the job.
func (n Name) Terminal() bool { return n == Succeeded || n == Failed || n == Cancelled }
