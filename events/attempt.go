package events

import (
	"strconv"
	"time"
)

// A job may run more than once: a DDS task with a TaskCrashed → RestartTask n trigger
// (Job.Restarts) that crashes is run again, up to n times. Each run is an attempt with
// its own life in the log, from incarnation to its own terminal event; a restarted event
// after a FAILED one begins the next, from SUBMITTED, so every service handles the new
// attempt as it handles a new job. The job's state is its last attempt's; the attempts
// before it are kept in State.Attempts.

// Attempt is one ended run of a job.
type Attempt struct {
	Attempt   int       `json:"attempt"` // from 1
	Cluster   string    `json:"cluster,omitempty"`
	Host      string    `json:"host,omitempty"`
	NativeID  string    `json:"native_id,omitempty"`
	WorkDir   string    `json:"work_dir,omitempty"`
	Status    Status    `json:"status"`
	ExitCode  *int      `json:"exit_code,omitempty"`
	Reason    string    `json:"reason,omitempty"`
	StartedAt time.Time `json:"started_at,omitzero"`
	EndedAt   time.Time `json:"ended_at,omitzero"`
}

// Attempt is the number of the job's current (last) attempt, from 1.
func (s State) Attempt() int { return len(s.Attempts) + 1 }

// Crashed reports whether the job's current attempt ran and ended FAILED with a
// non-zero exit code: a crash, as opposed to a job that could not be placed, staged
// or started, or whose stage-out failed.
func (s State) Crashed() bool {
	return s.Status == StatusFailed && s.NativeID != "" && s.ExitCode != nil && *s.ExitCode != 0
}

// Restartable reports whether a restart trigger runs the job again: its current attempt
// crashed, it has restarts left, and nobody asked to cancel it.
func (s State) Restartable() bool {
	return s.Crashed() && s.Job != nil && len(s.Attempts) < s.Job.Restarts && !s.CancelRequested
}

// applyRestarted closes the current attempt and begins the next from SUBMITTED, keeping
// the job and the ended attempts.
func applyRestarted(s *State, e *Event) error {
	if !s.Restartable() {
		return illegal(s, e, "only a crashed job with restarts left runs again")
	}
	var d RestartedData
	if err := payloadOf(e, &d); err != nil {
		return err
	}
	if d.Attempt != s.Attempt()+1 {
		return illegal(s, e, "restarted names attempt "+strconv.Itoa(d.Attempt)+", not the next, "+strconv.Itoa(s.Attempt()+1))
	}
	a := Attempt{Attempt: s.Attempt(), Cluster: s.Cluster, Host: s.Host, NativeID: s.NativeID,
		Status: s.Status, ExitCode: s.ExitCode, Reason: s.Reason, StartedAt: s.StartedAt, EndedAt: s.EndedAt}
	if s.Incarnation != nil {
		a.WorkDir = s.Incarnation.WorkDir
	}
	next := State{JobID: s.JobID, Status: StatusSubmitted, Job: s.Job, SubmittedAt: s.SubmittedAt,
		Attempts: append(s.Attempts[:len(s.Attempts):len(s.Attempts)], a), Events: s.Events}
	*s = next
	return nil
}
