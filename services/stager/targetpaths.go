package stager

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"slices"
	"sort"
	"strings"
)

// The v3 task description lets a job name an absolute path on the compute node as an
// input or output key ("/scratch/me/mesh.dat"). Such a path is outside the job's working
// directory, so the stager reaches it only inside the directories the operator opened
// to the job's cluster and submitter: Config.TargetPaths, FileRoots on the target (the
// gateway's own disk for a fork cluster, the cluster's host over SFTP for an ssh one).
// With none configured every absolute key is refused, naming the path and the setting.

// ErrTargetPath refuses an absolute path on the target that no target path opens.
var ErrTargetPath = errors.New("stager: absolute path on the target refused by the staging policy (stager.target_paths)")

// targetName checks an absolute key: clean, no "..", within the name budget.
func targetName(name string) (string, error) {
	if err := checkName(name, ErrTargetPath); err != nil {
		return "", err
	}
	if slices.Contains(strings.Split(name, "/"), "..") {
		return "", fmt.Errorf("%w: %q must not hold '..'", ErrTargetPath, name)
	}
	return path.Clean(name), nil
}

// targetRoots are the target paths for the job: a storage entry becomes its storage's
// path for this job (cleaned; one the job's incarnation does not know opens nothing).
func (r run) targetRoots() []FileRoot {
	var out []FileRoot
	for _, tp := range r.s.cfg.TargetPaths {
		if tp.Storage != "" {
			p, ok := r.who.storages[tp.Storage]
			if !ok || !path.IsAbs(p) || path.Clean(p) == "/" {
				continue
			}
			tp.Path, tp.Storage = path.Clean(p), ""
		}
		out = append(out, tp)
	}
	return out
}

// targetEndpoint is where an absolute key lives: the fork cluster's disk through the
// target-path roots, or the ssh cluster's host through the same SFTP connection as the
// working directory, confined to the root that opens the path.
func (r run) targetEndpoint(want string) (endpoint, error) {
	switch wd := r.dirs.wd.(type) {
	case *localDir:
		return hostFS{roots: r.targetRoots(), protected: r.s.protected, cluster: r.who.cluster,
			principal: r.who.principal, refused: ErrTargetPath}, nil
	case *sftpFS:
		return sftpTargetFS{c: wd, roots: r.targetRoots(), who: r.who}, nil
	}
	return nil, fmt.Errorf("%w: this target cannot reach absolute paths", ErrTargetPath)
}

// executableMaker is an endpoint that can make a staged file the job's program.
type executableMaker interface {
	makeExecutable(ctx context.Context, name string) error
}

// sftpTargetFS serves absolute names on an ssh cluster's host, each inside a target
// path open to the job for the access the operation needs.
type sftpTargetFS struct {
	c     *sftpFS
	roots []FileRoot
	who   scope
}

// within returns the SFTP tree rooted at the longest target path that opens name for
// want, and name relative to it; the tree confines the name as the target resolves it.
func (t sftpTargetFS) within(name, want string) (*sftpFS, string, error) {
	best, rel := "", ""
	for _, r := range t.roots {
		dir, ok := r.allows(t.who.cluster, t.who.principal, want)
		if ok && (strings.HasPrefix(name, dir+"/") || name == dir) && len(dir) > len(best) {
			best, rel = dir, strings.TrimLeft(strings.TrimPrefix(name, dir), "/")
		}
	}
	if best == "" {
		return nil, "", fmt.Errorf("%w: %s is in no target path open to %s for cluster %q and principal %q",
			ErrTargetPath, name, verbOf(want), t.who.cluster, t.who.principal)
	}
	if rel == "" {
		rel = "."
	}
	return &sftpFS{c: t.c.c, root: best, made: true}, rel, nil
}

func (t sftpTargetFS) open(ctx context.Context, name string) (io.ReadCloser, int64, error) {
	fs, rel, err := t.within(name, AccessRead)
	if err != nil {
		return nil, 0, err
	}
	return fs.open(ctx, rel)
}

func (t sftpTargetFS) put(ctx context.Context, name string, r io.Reader, size int64) error {
	fs, rel, err := t.within(name, AccessWrite)
	if err != nil {
		return err
	}
	return fs.put(ctx, rel, r, size)
}

func (t sftpTargetFS) list(ctx context.Context, dir string) ([]string, error) {
	fs, rel, err := t.within(strings.TrimSuffix(dir, "/"), AccessRead)
	if err != nil {
		return nil, err
	}
	names, err := fs.list(ctx, rel)
	sort.Strings(names)
	return names, err
}

func (t sftpTargetFS) makeExecutable(ctx context.Context, name string) error {
	fs, rel, err := t.within(name, AccessWrite)
	if err != nil {
		return err
	}
	return fs.makeExecutable(ctx, rel)
}
