package stager

import (
	"errors"
	"io/fs"

	"github.com/gridwire/gridwire/pkg/sshx"
)

// permanent marks an error that a retry cannot fix; the attempt is recorded and the
// file's budget is not spent on further attempts.
type permanent struct{ error }

func (p permanent) Unwrap() error { return p.error }

func isPermanent(err error) bool {
	var p permanent
	return errors.As(err, &p) || errors.Is(err, ErrPolicy) || errors.Is(err, ErrLocalName) ||
		errors.Is(err, ErrRemote) || errors.Is(err, ErrScheme) || errors.Is(err, ErrFileRoot) || errors.Is(err, ErrTargetPath) ||
		errors.Is(err, ErrTooLarge) || errors.Is(err, fs.ErrNotExist) || sshRefusal(err)
}

// sshRefusal reports an SSH failure no retry fixes: a host key known_hosts does not
// vouch for, or credentials that cannot be used.
func sshRefusal(err error) bool {
	var hk *sshx.HostKeyError
	return errors.As(err, &hk) || errors.Is(err, sshx.ErrConfig) || errors.Is(err, sshx.ErrEncryptedKey)
}
