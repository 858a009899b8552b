package events

import (
	"fmt"
	"time"
)

// Status is a job's canonical state.
type Status string

// The canonical states of DESIGN.md.
const (
	StatusNone       Status = ""
	StatusSubmitted  Status = "SUBMITTED"
	StatusIncarnated Status = "INCARNATED"
	StatusStagingIn  Status = "STAGING_IN"
	StatusQueued     Status = "QUEUED"
	StatusRunning    Status = "RUNNING"
	StatusHeld       Status = "HELD"
	StatusStagingOut Status = "STAGING_OUT"
	StatusSucceeded  Status = "SUCCEEDED"
	StatusFailed     Status = "FAILED"
	StatusCancelled  Status = "CANCELLED"
)

// statuses are the canonical states in life order.
var statuses = []Status{StatusSubmitted, StatusIncarnated, StatusStagingIn, StatusQueued, StatusRunning,
	StatusHeld, StatusStagingOut, StatusSucceeded, StatusFailed, StatusCancelled}

// Statuses returns every canonical state, in life order.
func Statuses() []Status { return append([]Status(nil), statuses...) }

// Known reports whether s is one of the canonical states (StatusNone is not).
func (s Status) Known() bool {
	for _, k := range statuses {
		if k == s {
			return true
		}
	}
	return false
}

// Terminal reports whether the status ends the job.
func (s Status) Terminal() bool {
	return s == StatusSucceeded || s == StatusFailed || s == StatusCancelled
}

// onTarget reports whether the job is in the hands of a target system.
func (s Status) onTarget() bool {
	return s == StatusQueued || s == StatusRunning || s == StatusHeld
}

// State is a job's folded history. It is built only by Apply.
type State struct {
	JobID  string `json:"job_id"`
	Status Status `json:"status"`
	Job    *Job   `json:"job,omitempty"`

	Incarnation *IncarnatedData `json:"incarnation,omitempty"`
	Cluster     string          `json:"cluster,omitempty"`
	Queue       string          `json:"queue,omitempty"`

	NativeID    string `json:"native_id,omitempty"`
	NativeState string `json:"native_state,omitempty"`
	Host        string `json:"host,omitempty"`
	HostKey     string `json:"host_key,omitempty"`

	ExitCode  *int           `json:"exit_code,omitempty"`
	Reason    string         `json:"reason,omitempty"`
	StagedOut *StagedOutData `json:"staged_out,omitempty"`
	// Group is a parent record's last summary of its children (see GroupOf).
	Group     *GroupSummary  `json:"group,omitempty"`
	Transfers []TransferData `json:"transfers,omitempty"`
	// Attempts are the job's earlier runs, when a restart trigger ran it again; the
	// fields above describe the current (last) one, attempt len(Attempts)+1.
	Attempts []Attempt `json:"attempts,omitempty"`
	// DirectoryDeleted is the current attempt's directory_deleted fact, once its working
	// directory was removed (or the removal failed for good) after its end.
	DirectoryDeleted *DirectoryDeletedData `json:"directory_deleted,omitempty"`

	StatusUnknown   bool `json:"status_unknown,omitempty"`
	CancelRequested bool `json:"cancel_requested,omitempty"`
	HoldRequested   bool `json:"hold_requested,omitempty"`
	ResumeRequested bool `json:"resume_requested,omitempty"`
	// heldFrom is the status a HOLD interrupted, restored by RESUME.
	HeldFrom Status `json:"held_from,omitempty"`

	SubmittedAt time.Time `json:"submitted_at,omitzero"`
	StartedAt   time.Time `json:"started_at,omitzero"`
	EndedAt     time.Time `json:"ended_at,omitzero"`
	UpdatedAt   time.Time `json:"updated_at,omitzero"`

	Events   int    `json:"events"`              // how many events were folded
	LastSeq  uint64 `json:"last_seq"`            // stream sequence of the last event
	LastID   string `json:"last_id,omitempty"`   // ID of the last event
	LastHash string `json:"last_hash,omitempty"` // chain hash of the last event
}

// Replay folds a job's events, in order, from nothing.
func Replay(evs []Event) (State, error) {
	var s State
	for _, e := range evs {
		var err error
		if s, err = Apply(s, e); err != nil {
			return s, err
		}
	}
	return s, nil
}

// Apply folds one event into a state. It is pure: no I/O, clock or randomness. An
// event the state machine does not allow in the current state is an error and leaves
// the state as it was.
func Apply(s State, e Event) (State, error) {
	next := s
	if err := next.Fold(&e); err != nil {
		return s, err
	}
	return next, nil
}

// Fold folds one event into the state in place, as Apply folds it into a copy: the
// same state, the same refusals, and a refused event leaves the state as it was (every
// step checks before it changes anything). A replay folds every event of the log, and
// copying a whole state in and out of each step was a large part of a fold.
func (s *State) Fold(e *Event) error {
	if s.Status.Terminal() && !afterEnd(s, e.Name) {
		return &TransitionError{Job: e.JobID, From: s.Status, Event: e.Name, Why: "the job has ended"}
	}
	if s.Status == StatusNone && e.Name != Submitted {
		return &TransitionError{Job: e.JobID, From: s.Status, Event: e.Name, Why: "the job was never submitted"}
	}
	was := s.Status
	if s.Job != nil && s.Job.Kind == KindGroup {
		if err := groupStep(s, e); err != nil {
			return err
		}
	} else if known, err := step(s, e); !known {
		return fmt.Errorf("%w: %q", ErrUnknownEvent, e.Name)
	} else if err != nil {
		return err
	}
	s.Events++
	// The only fields taken from the event's stored form (Store.decideOnce relies on it:
	// steps never read Seq, Subject or Hash).
	s.LastSeq, s.LastID, s.LastHash, s.UpdatedAt = e.Seq, e.ID, e.Hash, e.Time
	if s.Status.Terminal() && !was.Terminal() {
		s.EndedAt = e.Time // when it ended, not when housekeeping after the end ran
	}
	return nil
}

// afterEnd reports whether an ended job's state accepts the event: a restart of a
// crashed job with restarts left, or the one directory_deleted of the attempt.
func afterEnd(s *State, n Name) bool {
	switch n {
	case Restarted:
		return s.Restartable()
	case DirectoryDeleted:
		return s.DirectoryDeleted == nil
	}
	return false
}
