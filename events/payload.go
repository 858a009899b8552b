package events

import "time"

// Payloads, one per event name. An event with no payload type carries Note.

// NewPayload returns a fresh pointer to the payload type events of name n carry (Note
// for a name with no payload type of its own), ready to decode an event's data into.
func NewPayload(n Name) any {
	switch n {
	case Submitted:
		return &Job{}
	case Incarnated:
		return &IncarnatedData{}
	case StagingIn:
		return &StagingData{}
	case Transfer:
		return &TransferData{}
	case Queued:
		return &QueuedData{}
	case Started:
		return &StartedData{}
	case StatusChanged:
		return &StatusData{}
	case Exited:
		return &ExitedData{}
	case StagedOut:
		return &StagedOutData{}
	case Succeeded, Failed, Cancelled:
		return &EndData{}
	case PropertySet:
		return &PropertySetData{}
	case DirectoryDeleted:
		return &DirectoryDeletedData{}
	}
	return &Note{}
}

// IncarnatedData records what will run, where, so an auditor can see it exactly.
type IncarnatedData struct {
	Cluster     string            `json:"cluster"`
	Queue       string            `json:"queue,omitempty"`
	LRMS        string            `json:"lrms,omitempty"`
	Profile     string            `json:"profile"`        // profile name used
	ProfileHash string            `json:"profile_hash"`   // hash of the whole profile set
	WorkDir     string            `json:"work_dir"`       // the job's working directory on the target
	Host        string            `json:"host,omitempty"` // of a cluster of several, when the job's requirements choose one
	Scripts     map[string]Script `json:"scripts"`        // by template name: START, ABORT, ...
	// NativeIDPattern extracts the native ID from START's output (first group).
	NativeIDPattern string `json:"native_id_pattern,omitempty"`
	// StatusPattern is applied to each line of GET_JOB_STATUS's output; its named groups
	// "id" and "state" give a native ID and that job's native state.
	StatusPattern string `json:"status_pattern,omitempty"`
	// NativeStates maps native states to canonical ones: QUEUED, RUNNING, HELD, or ENDED
	// (the job left the LRMS; its exit status file says how it ended).
	NativeStates map[string]string `json:"native_states,omitempty"`
	// AbsentState is the canonical state of a native ID missing from GET_JOB_STATUS's
	// output (usually ENDED).
	AbsentState string `json:"absent_state,omitempty"`
	// StaticScripts are the profile's static scripts the Scripts run, by file name: each
	// Body is written once per target at Location (in BIN storage, the path keyed by its
	// SHA256) with mode 0700 before any script that uses it runs.
	StaticScripts map[string]Script `json:"static_scripts,omitempty"`
	// Substituted holds the job's values after {taskid}, {queue} and {lrms} substitution,
	// by field (executable, arguments.N, environment.NAME, directory, default_storage_base,
	// stdin, stdout.N, stderr.N, stage_in.N.from/.to, stage_out.N.from/.to, cleanup.N), where
	// they changed; the stager moves these values.
	Substituted map[string]string `json:"substituted,omitempty"`
	// Storages are the paths of the profile's storages (GPE OS profile §3) for this job,
	// by storage name, where the path was known when the job was rendered (not one that
	// holds a value only the target knows); USPACE is the job's working directory unless
	// the profile defines it. The JOB script exports every storage's path as
	// GPE_STORAGE_<NAME>; the stager opens those an operator's target path names.
	Storages map[string]string `json:"storages,omitempty"`
}

// Script is one rendered template.
type Script struct {
	Body   string `json:"body,omitempty"`
	SHA256 string `json:"sha256"`
	// Where the body is kept when it is not inline (e.g. a static script in BIN storage).
	Location string `json:"location,omitempty"`
}

// StagingData is the plan the stager starts from.
type StagingData struct {
	Direction string     `json:"direction"` // in or out
	Files     []FileCopy `json:"files"`     // resolved names; Attempts is each file's budget
	WorkDir   string     `json:"work_dir,omitempty"`
}

// TransferData is one attempt at one file.
type TransferData struct {
	Direction string        `json:"direction"` // in or out
	From      string        `json:"from"`
	To        string        `json:"to"`
	Attempt   int           `json:"attempt"` // k of
	Of        int           `json:"of"`      // N
	Bytes     int64         `json:"bytes"`
	Duration  time.Duration `json:"duration"`
	SHA256    string        `json:"sha256,omitempty"` // on success; of the manifest for a directory
	Error     string        `json:"error,omitempty"`  // on failure
	Directory bool          `json:"directory,omitempty"`
	Files     int           `json:"files,omitempty"` // files copied (a directory has several)
	// Permanent says the failure cannot be retried (refused name, 404...): no more attempts.
	Permanent bool `json:"permanent,omitempty"`
	// Backoff is the wait before the next attempt, when one follows a failure.
	Backoff time.Duration `json:"backoff,omitempty"`
}

// QueuedData hands the job to its cluster's executors.
type QueuedData struct {
	Cluster string `json:"cluster"`
}

// StartedData records the run the executor started.
type StartedData struct {
	Cluster     string `json:"cluster"`
	Host        string `json:"host,omitempty"`
	HostKey     string `json:"host_key,omitempty"` // SHA256 fingerprint for ssh targets
	NativeID    string `json:"native_id"`
	NativeState string `json:"native_state,omitempty"`
	Running     bool   `json:"running"` // true: RUNNING at once (fork); false: QUEUED in an LRMS
	Adopted     bool   `json:"adopted,omitempty"`
	Executor    string `json:"executor,omitempty"`
}

// StatusData is a canonical and native state observed on the target.
type StatusData struct {
	State       Status `json:"state"`
	NativeState string `json:"native_state,omitempty"`
	// Group, on a parent record's status_changed, counts its children by state when
	// the parent moved.
	Group *GroupSummary `json:"group,omitempty"`
}

// ExitedData is the program's end.
type ExitedData struct {
	ExitCode    int    `json:"exit_code"`
	NativeState string `json:"native_state,omitempty"`
	Reason      string `json:"reason,omitempty"` // set when it ended without an exit status
}

// StagedOutData says how stage-out and cleanup went.
type StagedOutData struct {
	OK      bool     `json:"ok"`
	Failed  []string `json:"failed,omitempty"`
	Reason  string   `json:"reason,omitempty"`
	Files   int      `json:"files,omitempty"`   // stage-out entries copied
	Cleaned []string `json:"cleaned,omitempty"` // cleanup names removed
}

// EndData is the payload of a terminal event.
type EndData struct {
	ExitCode *int   `json:"exit_code,omitempty"`
	Reason   string `json:"reason,omitempty"`
	// Group, on a parent record's terminal event, counts how its children ended.
	Group *GroupSummary `json:"group,omitempty"`
}

// RestartedData begins a new attempt of a job whose last one crashed.
type RestartedData struct {
	Attempt int    `json:"attempt"` // the attempt that begins, from 2
	Of      int    `json:"of"`      // attempts the job may have in all (its Restarts + 1)
	Reason  string `json:"reason"`  // how the last attempt ended
}

// SessionUpdateData changes the topology of a running session (a DDS topology's parent
// record), as DDS's topology update does: the instances the new topology adds are new
// children (their submitted events are appended first), those it no longer has leave
// the session and are stopped, and every other child runs on untouched.
type SessionUpdateData struct {
	Added    []string `json:"added,omitempty"`   // new children, in the new topology's order
	Removed  []string `json:"removed,omitempty"` // children that leave the session
	Original Original `json:"original"`          // the new description, for audit
}

// DirectoryDeletedData records the removal of an ended attempt's working directory under
// its cluster's retention: what was removed, by which script, and how it went. A removal
// that failed every try is recorded too (OK false), and not tried again.
type DirectoryDeletedData struct {
	OK       bool     `json:"ok"`
	Paths    []string `json:"paths"`              // the working directory (or directories) removed
	Host     string   `json:"host,omitempty"`     // where, for a cluster of several hosts
	Script   string   `json:"script"`             // DELETE (the profile's) or "default" (rm -rf)
	ExitCode int      `json:"exit_code"`          // of the last try
	Tries    int      `json:"tries"`              // how many times it ran
	Reason   string   `json:"reason,omitempty"`   // why it failed
	Output   string   `json:"output,omitempty"`   // an excerpt of the last try's output
	Executor string   `json:"executor,omitempty"` // the process that ran it
}

// Note is a free-text payload for requests, status_unknown/known and action results.
type Note struct {
	Reason string `json:"reason,omitempty"`
	Action string `json:"action,omitempty"`
	Output string `json:"output,omitempty"`
}

// CancelStartDeadline is the Action of a cancel request the watcher makes for a job
// still waiting in a batch queue past its start-before deadline (JRDL's jobStartBefore):
// the ABORT that carries it out ends the job FAILED with the request's reason, since the
// job did not do what was asked of it, rather than CANCELLED.
const CancelStartDeadline = "start_deadline"
