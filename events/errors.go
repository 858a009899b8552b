package events

import (
	"errors"
	"fmt"
)

// Sentinel errors; callers match them with errors.Is.
var (
	ErrBadSubject        = errors.New("events: malformed subject")
	ErrBadEvent          = errors.New("events: invalid event")
	ErrUnknownEvent      = errors.New("events: unknown event type")
	ErrIllegalTransition = errors.New("events: illegal transition")
	ErrConflict          = errors.New("events: another writer appended to the job first")
	ErrNotFound          = errors.New("events: no such job")
	ErrTooManyConflicts  = errors.New("events: gave up after repeated append conflicts")
)

// TransitionError says which event was refused in which state.
type TransitionError struct {
	Job   string
	From  Status
	Event Name
	Why   string
}

func (e *TransitionError) Error() string {
	msg := fmt.Sprintf("events: job %s: %s not allowed in state %s", e.Job, e.Event, e.From)
	if e.Why != "" {
		msg += ": " + e.Why
	}
	return msg
}

// Unwrap makes errors.Is(err, ErrIllegalTransition) hold.
func (e *TransitionError) Unwrap() error { return ErrIllegalTransition }
