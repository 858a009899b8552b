package stager

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/pkg/cluster"
	"github.com/gridwire/gridwire/pkg/target"
)

// ErrNoWorkDir means a job reached staging without a working directory.
var ErrNoWorkDir = errors.New("stager: the job has no working directory")

// workDir opens the job's working directory where the job runs: on this machine for
// a fork cluster, over SFTP on the cluster's host for an ssh cluster.
func (s *stager) workDir(ctx context.Context, st events.State) (workDir, error) {
	if st.Incarnation == nil || st.Incarnation.WorkDir == "" {
		return nil, fmt.Errorf("job %s: %w", st.JobID, ErrNoWorkDir)
	}
	return s.openDir(ctx, st, st.Incarnation.WorkDir, false)
}

// openDir opens dir on the job's target; bare opens it without gridwire's control
// directory (a job directory of the job's choosing).
func (s *stager) openDir(ctx context.Context, st events.State, dir string, bare bool) (workDir, error) {
	cl, ok := s.cfg.Clusters.Find(st.Cluster)
	switch {
	case !ok && len(s.cfg.Clusters.Clusters) > 0:
		return nil, fmt.Errorf("job %s: cluster %q is not in the stager's config", st.JobID, st.Cluster)
	case !ok, cl.Kind == cluster.KindFork:
		d := openLocalDir(dir)
		d.bare = bare
		return d, nil
	}
	host := cl.Hosts[0]
	switch {
	case slices.Contains(cl.Hosts, st.Host):
		host = st.Host // where it ran
	case st.Incarnation != nil && slices.Contains(cl.Hosts, st.Incarnation.Host):
		host = st.Incarnation.Host // where it will run
	}
	c, err := s.ssh.sftp(ctx, host, target.ClusterLogin(cl), false)
	if err != nil {
		return nil, fmt.Errorf("job %s: reaching working directory on %s: %w", st.JobID, host, err)
	}
	return &sftpFS{c: c, root: dir, bare: bare}, nil
}

// onGateway reports whether the job's target is this machine's disk (a fork cluster).
func (s *stager) onGateway(st events.State) bool {
	cl, ok := s.cfg.Clusters.Find(st.Cluster)
	return !ok || cl.Kind == cluster.KindFork
}

// scope is whose transfer it is: the job's cluster and submitter, which file roots
// are opened to.
type scope struct {
	cluster, principal string
	storages           map[string]string // the job's profile storage paths (target paths may name them)
}

func scopeOf(st events.State) scope {
	s := scope{cluster: st.Cluster, principal: jobOf(st).Submitter}
	if st.Incarnation != nil {
		s.storages = st.Incarnation.Storages
	}
	return s
}

// remoteEndpoint is the store a remote name lives in and the name within it.
func (s *stager) remoteEndpoint(ctx context.Context, r remote, who scope) (endpoint, string, error) {
	u := r.url
	switch u.Scheme {
	case SchemeFile:
		return s.hostFS(who), u.Path, nil
	case SchemeHTTP, SchemeHTTPS:
		return s.http, u.String(), nil
	case SchemeUpload:
		return objectEndpoint{js: s.deps.JS}, objectName(u), nil
	case SchemeSFTP, SchemeSCP:
		l := target.Login{User: s.cfg.SSH.User, Identity: s.cfg.SSH.Identity, KnownHosts: s.cfg.SSH.KnownHosts}
		if u.User != nil && u.User.Username() != "" {
			l.User = u.User.Username()
		}
		c, err := s.ssh.sftp(ctx, u.Host, l, true)
		if err != nil {
			return nil, "", err
		}
		return &sftpFS{c: c}, u.Path, nil
	}
	if p, ok := s.plugins.byScheme[u.Scheme]; ok {
		return p, u.String(), nil
	}
	return nil, "", fmt.Errorf("%w: %q", ErrScheme, u.Scheme)
}
