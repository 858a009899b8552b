package events

// step applies one event type's transition to s (temporal's one-apply-per-event-type
// habit), in place and only once it has checked everything it refuses on; known is false
// for an unknown type. The transitions are called directly, not through function
// values, so the state and the event stay where the caller keeps them.
func step(s *State, e *Event) (known bool, err error) {
	switch e.Name {
	case Submitted:
		return true, applySubmitted(s, e)
	case Incarnated:
		return true, applyIncarnated(s, e)
	case StagingIn:
		return true, from(s, e, StatusStagingIn, StatusIncarnated)
	case Transfer:
		return true, applyTransfer(s, e)
	case Queued:
		return true, applyQueued(s, e)
	case Started:
		return true, applyStarted(s, e)
	case StatusChanged:
		return true, applyStatusChanged(s, e)
	case StatusUnknown:
		s.StatusUnknown = true
	case StatusKnown:
		s.StatusUnknown = false
	case Held:
		return true, applyHeld(s, e)
	case Resumed:
		return true, applyResumed(s, e)
	case Exited:
		return true, applyExited(s, e)
	case StagedOut:
		return true, applyStagedOut(s, e)
	case Succeeded:
		return true, applySucceeded(s, e)
	case Failed:
		return true, end(s, e, StatusFailed)
	case Cancelled:
		return true, end(s, e, StatusCancelled)
	case CancelRequested:
		s.CancelRequested = true
	case HoldRequested:
		s.HoldRequested, s.ResumeRequested = true, false
	case ResumeRequested:
		s.ResumeRequested, s.HoldRequested = true, false
	case ActionFailed:
		return true, applyActionFailed(s, e)
	case PropertySet:
		return true, illegal(s, e, "a property is set on its session (the topology's parent record), not on a task")
	case Restarted:
		return true, applyRestarted(s, e)
	case SessionUpdated:
		return true, illegal(s, e, "a session's topology is updated on its parent record, not on a task")
	case DirectoryDeleted:
		return true, applyDirectoryDeleted(s, e)
	default:
		return false, nil
	}
	return true, nil
}

// applyDirectoryDeleted records the removal of an ended attempt's working directory; the
// job's status stays what its end made it.
func applyDirectoryDeleted(s *State, e *Event) error {
	if !s.Status.Terminal() || s.DirectoryDeleted != nil {
		return illegal(s, e, "a working directory is deleted once, after the attempt's end")
	}
	// Readers that fold a stored body without its subject see no route; the subject and
	// the signer's rights (the cluster's executor) are checked where they are known.
	if e.Route != "" && e.Route != s.Cluster {
		return illegal(s, e, "deleted by cluster "+e.Route+" but the attempt ran on "+s.Cluster)
	}
	var d DirectoryDeletedData
	if err := payloadOf(e, &d); err != nil {
		return err
	}
	s.DirectoryDeleted = &d
	return nil
}

func illegal(s *State, e *Event, why string) error {
	return &TransitionError{Job: e.JobID, From: s.Status, Event: e.Name, Why: why}
}

func applySubmitted(s *State, e *Event) error {
	if s.Status != StatusNone {
		return illegal(s, e, "already submitted")
	}
	var j Job
	if err := payloadOf(e, &j); err != nil {
		return err
	}
	if j.ID != e.JobID {
		return illegal(s, e, "payload job id "+j.ID+" differs from the event subject")
	}
	s.JobID, s.Job, s.Status, s.SubmittedAt = e.JobID, &j, StatusSubmitted, e.Time
	return nil
}

func applyIncarnated(s *State, e *Event) error {
	if s.Status != StatusSubmitted {
		return illegal(s, e, "only a submitted job is incarnated")
	}
	if s.Job != nil && s.Job.Kind == KindGroup {
		return illegal(s, e, "a parent record never runs")
	}
	var d IncarnatedData
	if err := payloadOf(e, &d); err != nil {
		return err
	}
	s.Incarnation, s.Cluster, s.Queue, s.Status = &d, d.Cluster, d.Queue, StatusIncarnated
	return nil
}

// from moves to `to` when the state is one of `allowed`.
func from(s *State, e *Event, to Status, allowed ...Status) error {
	for _, a := range allowed {
		if s.Status == a {
			s.Status = to
			return nil
		}
	}
	return illegal(s, e, "")
}

func applyTransfer(s *State, e *Event) error {
	if s.Status != StatusStagingIn && s.Status != StatusStagingOut {
		return illegal(s, e, "transfers happen while staging")
	}
	var d TransferData
	if err := payloadOf(e, &d); err != nil {
		return err
	}
	s.Transfers = append(s.Transfers[:len(s.Transfers):len(s.Transfers)], d)
	return nil
}

func applyQueued(s *State, e *Event) error {
	// INCARNATED → QUEUED directly when there is nothing to stage in.
	if s.Status != StatusIncarnated && s.Status != StatusStagingIn {
		return illegal(s, e, "")
	}
	if e.Route != "" && e.Route != s.Cluster {
		return illegal(s, e, "queued for cluster "+e.Route+" but incarnated for "+s.Cluster)
	}
	s.Status = StatusQueued
	return nil
}

func applyStarted(s *State, e *Event) error {
	if s.Status != StatusQueued || s.NativeID != "" {
		return illegal(s, e, "a job starts once, from QUEUED")
	}
	var d StartedData
	if err := payloadOf(e, &d); err != nil {
		return err
	}
	if d.NativeID == "" {
		return illegal(s, e, "started without a native id")
	}
	s.NativeID, s.NativeState, s.Host, s.HostKey, s.StartedAt = d.NativeID, d.NativeState, d.Host, d.HostKey, e.Time
	if d.Running {
		s.Status = StatusRunning
	}
	return nil
}

func applyStatusChanged(s *State, e *Event) error {
	if !s.Status.onTarget() || s.NativeID == "" {
		return illegal(s, e, "status changes only while the target has the job")
	}
	var d StatusData
	if err := payloadOf(e, &d); err != nil {
		return err
	}
	if !d.State.onTarget() {
		return illegal(s, e, "status_changed may only name QUEUED, RUNNING or HELD, not "+string(d.State))
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
	return nil
}

func applyHeld(s *State, e *Event) error {
	if s.Status != StatusQueued && s.Status != StatusRunning {
		return illegal(s, e, "only a queued or running job is held")
	}
	s.HeldFrom, s.Status, s.HoldRequested = s.Status, StatusHeld, false
	return nil
}

func applyResumed(s *State, e *Event) error {
	if s.Status != StatusHeld {
		return illegal(s, e, "only a held job resumes")
	}
	s.Status, s.HeldFrom, s.ResumeRequested = s.HeldFrom, "", false
	if s.Status == "" {
		s.Status = StatusQueued
	}
	return nil
}

func applyExited(s *State, e *Event) error {
	if !s.Status.onTarget() || s.NativeID == "" {
		return illegal(s, e, "only a started job exits")
	}
	var d ExitedData
	if err := payloadOf(e, &d); err != nil {
		return err
	}
	code := d.ExitCode
	s.ExitCode, s.Status, s.Reason = &code, StatusStagingOut, d.Reason
	if d.NativeState != "" {
		s.NativeState = d.NativeState
	}
	return nil
}

func applyStagedOut(s *State, e *Event) error {
	if s.Status != StatusStagingOut || s.StagedOut != nil {
		return illegal(s, e, "stage-out is recorded once, after the exit")
	}
	var d StagedOutData
	if err := payloadOf(e, &d); err != nil {
		return err
	}
	s.StagedOut = &d
	return nil
}

func applySucceeded(s *State, e *Event) error {
	switch {
	case s.Status != StatusStagingOut || s.StagedOut == nil:
		return illegal(s, e, "a job succeeds only after its stage-out")
	case s.ExitCode == nil || *s.ExitCode != 0:
		return illegal(s, e, "a job succeeds only with exit code 0")
	case !s.StagedOut.OK:
		return illegal(s, e, "a job whose stage-out failed cannot succeed")
	}
	s.Status = StatusSucceeded
	return nil
}

func end(s *State, e *Event, to Status) error {
	var d EndData
	if len(e.Data) > 0 {
		if err := payloadOf(e, &d); err != nil {
			return err
		}
	}
	if d.ExitCode != nil {
		code := *d.ExitCode
		s.ExitCode = &code
	}
	s.Status, s.Reason = to, d.Reason
	return nil
}

func applyActionFailed(s *State, e *Event) error {
	var n Note
	if err := payloadOf(e, &n); err != nil {
		return err
	}
	switch n.Action {
	case "HOLD":
		s.HoldRequested = false
	case "RESUME":
		s.ResumeRequested = false
	case "ABORT":
		s.CancelRequested = false
	}
	return nil
}
