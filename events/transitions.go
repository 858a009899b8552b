package events

// stepFor returns the transition of one event type, nil for an unknown type.
func stepFor(n Name) stepFunc {
	switch n {
	case Submitted:
		return applySubmitted
	case Incarnated:
		return applyIncarnated
	case StagingIn:
		return from(StatusStagingIn, StatusIncarnated)
	case Transfer:
		return applyTransfer
	case Queued:
		return applyQueued
	case Started:
		return applyStarted
	case StatusChanged:
		return applyStatusChanged
	case StatusUnknown:
		return flag(func(s *State, v bool) { s.StatusUnknown = v }, true)
	case StatusKnown:
		return flag(func(s *State, v bool) { s.StatusUnknown = v }, false)
	case Held:
		return applyHeld
	case Resumed:
		return applyResumed
	case Exited:
		return applyExited
	case StagedOut:
		return applyStagedOut
	case Succeeded:
		return applySucceeded
	case Failed:
		return end(StatusFailed)
	case Cancelled:
		return end(StatusCancelled)
	case CancelRequested:
		return flag(func(s *State, v bool) { s.CancelRequested = v }, true)
	case HoldRequested:
		return flag(func(s *State, v bool) { s.HoldRequested, s.ResumeRequested = v, !v }, true)
	case ResumeRequested:
		return flag(func(s *State, v bool) { s.ResumeRequested, s.HoldRequested = v, !v }, true)
	case ActionFailed:
		return applyActionFailed
	case PropertySet:
		return func(s State, e Event) (State, error) {
			return s, illegal(s, e, "a property is set on its session (the topology's parent record), not on a task")
		}
	case Restarted:
		return applyRestarted
	case SessionUpdated:
		return func(s State, e Event) (State, error) {
			return s, illegal(s, e, "a session's topology is updated on its parent record, not on a task")
		}
	case DirectoryDeleted:
		return applyDirectoryDeleted
	}
	return nil
}

// applyDirectoryDeleted records the removal of an ended attempt's working directory; the
// job's status stays what its end made it.
func applyDirectoryDeleted(s State, e Event) (State, error) {
	if !s.Status.Terminal() || s.DirectoryDeleted != nil {
		return s, illegal(s, e, "a working directory is deleted once, after the attempt's end")
	}
	// Readers that fold a stored body without its subject see no route; the subject and
	// the signer's rights (the cluster's executor) are checked where they are known.
	// Readers that fold a stored body without its subject see no route; the subject and
	// the signer's rights (the cluster's executor) are checked where they are known.
	if e.Route != "" && e.Route != s.Cluster {
		return s, illegal(s, e, "deleted by cluster "+e.Route+" but the attempt ran on "+s.Cluster)
	}
	var d DirectoryDeletedData
	if err := e.Payload(&d); err != nil {
		return s, err
	}
	s.DirectoryDeleted = &d
	return s, nil
}

func illegal(s State, e Event, why string) error {
	return &TransitionError{Job: e.JobID, From: s.Status, Event: e.Name, Why: why}
}

func applySubmitted(s State, e Event) (State, error) {
	if s.Status != StatusNone {
		return s, illegal(s, e, "already submitted")
	}
	var j Job
	if err := e.Payload(&j); err != nil {
		return s, err
	}
	if j.ID != e.JobID {
		return s, illegal(s, e, "payload job id "+j.ID+" differs from the event subject")
	}
	s.JobID, s.Job, s.Status, s.SubmittedAt = e.JobID, &j, StatusSubmitted, e.Time
	return s, nil
}

func applyIncarnated(s State, e Event) (State, error) {
	if s.Status != StatusSubmitted {
		return s, illegal(s, e, "only a submitted job is incarnated")
	}
	if s.Job != nil && s.Job.Kind == KindGroup {
		return s, illegal(s, e, "a parent record never runs")
	}
	var d IncarnatedData
	if err := e.Payload(&d); err != nil {
		return s, err
	}
	s.Incarnation, s.Cluster, s.Queue, s.Status = &d, d.Cluster, d.Queue, StatusIncarnated
	return s, nil
}

// from moves to `to` when the state is one of `allowed`.
func from(to Status, allowed ...Status) stepFunc {
	return func(s State, e Event) (State, error) {
		for _, a := range allowed {
			if s.Status == a {
				s.Status = to
				return s, nil
			}
		}
		return s, illegal(s, e, "")
	}
}

func applyTransfer(s State, e Event) (State, error) {
	if s.Status != StatusStagingIn && s.Status != StatusStagingOut {
		return s, illegal(s, e, "transfers happen while staging")
	}
	var d TransferData
	if err := e.Payload(&d); err != nil {
		return s, err
	}
	s.Transfers = append(s.Transfers[:len(s.Transfers):len(s.Transfers)], d)
	return s, nil
}

func applyQueued(s State, e Event) (State, error) {
	// INCARNATED → QUEUED directly when there is nothing to stage in.
	if s.Status != StatusIncarnated && s.Status != StatusStagingIn {
		return s, illegal(s, e, "")
	}
	if e.Route != "" && e.Route != s.Cluster {
		return s, illegal(s, e, "queued for cluster "+e.Route+" but incarnated for "+s.Cluster)
	}
	s.Status = StatusQueued
	return s, nil
}

func applyStarted(s State, e Event) (State, error) {
	if s.Status != StatusQueued || s.NativeID != "" {
		return s, illegal(s, e, "a job starts once, from QUEUED")
	}
	var d StartedData
	if err := e.Payload(&d); err != nil {
		return s, err
	}
	if d.NativeID == "" {
		return s, illegal(s, e, "started without a native id")
	}
	s.NativeID, s.NativeState, s.Host, s.HostKey, s.StartedAt = d.NativeID, d.NativeState, d.Host, d.HostKey, e.Time
	if d.Running {
		s.Status = StatusRunning
	}
	return s, nil
}

func applyStatusChanged(s State, e Event) (State, error) {
	if !s.Status.onTarget() || s.NativeID == "" {
		return s, illegal(s, e, "status changes only while the target has the job")
	}
	var d StatusData
	if err := e.Payload(&d); err != nil {
		return s, err
	}
	if !d.State.onTarget() {
		return s, illegal(s, e, "status_changed may only name QUEUED, RUNNING or HELD, not "+string(d.State))
	}
	switch {
	case d.State == StatusHeld && s.Status != StatusHeld:
		// Seen held before (or without) gridwire's own held event: a pending hold
		// request is met, and left standing it would hold the job again after a resume.
		s.HeldFrom, s.HoldRequested = s.Status, false
	case d.State != StatusHeld && s.Status == StatusHeld:
		// Seen released before the resumed event (or released behind gridwire's back):
		// the job is no longer held from anywhere, and a pending resume request is met;
		// left standing it would release the job again after the next hold.
		s.HeldFrom, s.ResumeRequested = "", false
	}
	s.Status, s.NativeState = d.State, d.NativeState
	return s, nil
}

func flag(set func(*State, bool), v bool) stepFunc {
	return func(s State, e Event) (State, error) {
		set(&s, v)
		return s, nil
	}
}

func applyHeld(s State, e Event) (State, error) {
	if s.Status != StatusQueued && s.Status != StatusRunning {
		return s, illegal(s, e, "only a queued or running job is held")
	}
	s.HeldFrom, s.Status, s.HoldRequested = s.Status, StatusHeld, false
	return s, nil
}

func applyResumed(s State, e Event) (State, error) {
	if s.Status != StatusHeld {
		return s, illegal(s, e, "only a held job resumes")
	}
	s.Status, s.HeldFrom, s.ResumeRequested = s.HeldFrom, "", false
	if s.Status == "" {
		s.Status = StatusQueued
	}
	return s, nil
}

func applyExited(s State, e Event) (State, error) {
	if !s.Status.onTarget() || s.NativeID == "" {
		return s, illegal(s, e, "only a started job exits")
	}
	var d ExitedData
	if err := e.Payload(&d); err != nil {
		return s, err
	}
	code := d.ExitCode
	s.ExitCode, s.Status, s.Reason = &code, StatusStagingOut, d.Reason
	if d.NativeState != "" {
		s.NativeState = d.NativeState
	}
	return s, nil
}

func applyStagedOut(s State, e Event) (State, error) {
	if s.Status != StatusStagingOut || s.StagedOut != nil {
		return s, illegal(s, e, "stage-out is recorded once, after the exit")
	}
	var d StagedOutData
	if err := e.Payload(&d); err != nil {
		return s, err
	}
	s.StagedOut = &d
	return s, nil
}

func applySucceeded(s State, e Event) (State, error) {
	switch {
	case s.Status != StatusStagingOut || s.StagedOut == nil:
		return s, illegal(s, e, "a job succeeds only after its stage-out")
	case s.ExitCode == nil || *s.ExitCode != 0:
		return s, illegal(s, e, "a job succeeds only with exit code 0")
	case !s.StagedOut.OK:
		return s, illegal(s, e, "a job whose stage-out failed cannot succeed")
	}
	s.Status = StatusSucceeded
	return s, nil
}

func end(to Status) stepFunc {
	return func(s State, e Event) (State, error) {
		var d EndData
		if len(e.Data) > 0 {
			if err := e.Payload(&d); err != nil {
				return s, err
			}
		}
		if d.ExitCode != nil {
			code := *d.ExitCode
			s.ExitCode = &code
		}
		s.Status, s.Reason = to, d.Reason
		return s, nil
	}
}

func applyActionFailed(s State, e Event) (State, error) {
	var n Note
	if err := e.Payload(&n); err != nil {
		return s, err
	}
	switch n.Action {
	case "HOLD":
		s.HoldRequested = false
	case "RESUME":
		s.ResumeRequested = false
	case "ABORT":
		s.CancelRequested = false
	}
	return s, nil
}
