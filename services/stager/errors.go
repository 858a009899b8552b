package stager

import (
	"errors"
	"io/fs"
)

// permanent marks an error that a retry cannot fix; the attempt is recorded and the
// file's budget is not spent on further attempts.
type permanent struct{ error }

func (p permanent) Unwrap() error { return p.error }

func isPermanent(err error) bool {
	var p permanent
	return errors.As(err, &p) || errors.Is(err, ErrPolicy) || errors.Is(err, ErrLocalName) ||
		errors.Is(err, ErrRemote) || errors.Is(err, ErrScheme) || errors.Is(err, ErrFileRoot) ||
		errors.Is(err, ErrTooLarge) || errors.Is(err, fs.ErrNotExist)
}
