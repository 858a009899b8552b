package executor

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/gridwire/gridwire/pkg/cluster"
)

// ErrRootJobs refuses a fork cluster that would run jobs as root by accident.
var ErrRootJobs = errors.New("executor: refusing to run a fork cluster's jobs as root")

// RunAs is the identity a fork cluster's jobs run as, when it is not the gateway's own.
type RunAs struct {
	User       string
	Credential *syscall.Credential
	Home       string
}

// runAsOf decides who a fork cluster's jobs run as: its run_as user (switched to when the
// gateway is root; the gateway's own identity when it already is that user), or the
// gateway's identity. A gateway running as root without run_as refuses, unless the
// operator set allow_root.
func runAsOf(cl cluster.Cluster, euid int) (*RunAs, error) {
	if cl.RunAs == "" {
		if euid == 0 && !cl.AllowRoot {
			return nil, fmt.Errorf("%w: cluster %s: the gateway runs as root and the cluster has no run_as; "+
				"set run_as to an unprivileged user, or allow_root: true (serve --allow-root-jobs for the built-in cluster) "+
				"to run jobs as root knowingly", ErrRootJobs, cl.Name)
		}
		return nil, nil
	}
	u, err := user.Lookup(cl.RunAs)
	if err != nil {
		if u, err = user.LookupId(cl.RunAs); err != nil {
			return nil, fmt.Errorf("executor: cluster %s: run_as %q: %w", cl.Name, cl.RunAs, err)
		}
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err := errors.Join(err1, err2); err != nil {
		return nil, fmt.Errorf("executor: cluster %s: run_as %q: %w", cl.Name, cl.RunAs, err)
	}
	switch {
	case uid == 0:
		return nil, fmt.Errorf("%w: cluster %s: run_as %q is root", ErrRootJobs, cl.Name, cl.RunAs)
	case int(uid) == euid:
		return nil, nil // already that user
	case euid != 0:
		return nil, fmt.Errorf("executor: cluster %s: run_as %q needs the gateway to run as root (it runs as uid %d)", cl.Name, cl.RunAs, euid)
	}
	cred := &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	if ids, err := u.GroupIds(); err == nil {
		for _, g := range ids {
			if n, err := strconv.ParseUint(g, 10, 32); err == nil {
				cred.Groups = append(cred.Groups, uint32(n))
			}
		}
	}
	return &RunAs{User: u.Username, Credential: cred, Home: u.HomeDir}, nil
}

// hand gives the job's working directory to its user: every file and directory in it
// (staged in by the gateway, as root) is chowned, symlinks themselves and not what they
// point at.
func (r *RunAs) hand(wd string) error {
	if r == nil {
		return nil
	}
	uid, gid := int(r.Credential.Uid), int(r.Credential.Gid)
	return filepath.WalkDir(wd, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, gid)
	})
}
