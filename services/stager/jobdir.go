package stager

import (
	"context"
	"errors"
	"fmt"
	"path"
	"path/filepath"
	"strings"

	"github.com/gridwire/gridwire/events"
)

// The job's directory is where its program runs (JRDL's <directory>): the working
// directory when the job names none, a directory inside it when the name is relative
// (the JOB script cds there from the working directory), the named path when it is
// absolute. Staged files, stage-out sources, stdout and stderr copies given as plain
// relative names, and relative cleanup entries all live there, so what the job reads and
// writes is what the stager moves. gridwire's control directory (.gridwire: stdin, the
// captured stdout and stderr, the exit status) stays in the working directory.

// ErrJobDir refuses a job directory the staging policy (stager.target_paths) does not
// open to the job.
var ErrJobDir = errors.New("stager: job directory refused by the staging policy")

// ErrCleanupPolicy refuses an absolute cleanup path outside the job's directories and
// outside what the staging policy (stager.target_paths) lets the stager remove.
var ErrCleanupPolicy = errors.New("stager: cleanup refused by the staging policy")

// jobDirPath is the job's directory on its target, given its working directory and its
// (substituted) directory attribute.
func jobDirPath(workDir, directory string) string {
	switch {
	case directory == "":
		return workDir
	case path.IsAbs(directory):
		return path.Clean(directory)
	}
	return path.Join(workDir, directory)
}

// dirs are the two places a pass works in: the working directory (gridwire's control
// files) and the job's directory (the job's files); they are one when the job names no
// directory of its own.
type dirs struct {
	wd, jd         workDir
	wdPath, jdPath string
}

// usesJobDir reports whether any item reads or writes the job's directory.
func usesJobDir(items []item) bool {
	for _, it := range items {
		if !it.stdio && !it.abs || it.jobFile != "" {
			return true
		}
	}
	return false
}

func (d dirs) Close() error {
	if d.jd == nil || d.jd == d.wd {
		return d.wd.Close()
	}
	return errors.Join(d.jd.Close(), d.wd.Close())
}

// openDirs opens the job's working directory and its job directory. A job directory
// outside the working directory is an absolute path on the target, which the stager
// uses only inside the operator's stager.target_paths open to the job for each of want
// (AccessRead, AccessWrite): on a fork cluster that is the gateway's own disk (never a
// protected path), on an SSH or batch cluster the host it stages to. When the pass does
// not use the job's directory (uses false) a directory the policy does not open is no
// error: the job runs there without the stager.
func (s *stager) openDirs(ctx context.Context, st events.State, job events.Job, uses bool, want ...string) (dirs, error) {
	wd, err := s.workDir(ctx, st)
	if err != nil {
		return dirs{}, err
	}
	d := dirs{wd: wd, jd: wd, wdPath: st.Incarnation.WorkDir, jdPath: st.Incarnation.WorkDir}
	dir := job.Directory
	if dir == "" {
		return d, nil
	}
	d.jdPath = jobDirPath(d.wdPath, dir)
	if !s.insideWorkDir(st, d.wdPath, d.jdPath) {
		if !uses {
			d.jd = nil
			return d, nil
		}
		for _, w := range want {
			if err := s.targetAllows(st, wd, d.jdPath, w); err != nil {
				wd.Close()
				return dirs{}, fmt.Errorf("%w: directory %s: %w", ErrJobDir, dir, err)
			}
		}
	}
	if d.jd, err = s.openDir(ctx, st, d.jdPath, true); err != nil {
		wd.Close()
		return dirs{}, err
	}
	return d, nil
}

// insideWorkDir reports whether the job's directory is inside its working directory:
// on this machine with the links that exist resolved; on a remote host as written (the
// SFTP tree opened there confines the job's names to it either way).
func (s *stager) insideWorkDir(st events.State, wd, jd string) bool {
	if s.onGateway(st) {
		return insideReal(wd, jd)
	}
	return within(wd, jd)
}

// targetAllows checks an absolute path on the job's target against stager.target_paths.
func (s *stager) targetAllows(st events.State, wd workDir, name, want string) error {
	who := scopeOf(st)
	if s.onGateway(st) {
		return s.targetHostFS(who).check(name, want)
	}
	sf, ok := wd.(*sftpFS)
	if !ok {
		return fmt.Errorf("%w: this target cannot reach absolute paths", ErrTargetPath)
	}
	_, _, err := sftpTargetFS{c: sf, roots: s.cfg.TargetPaths, who: who}.within(name, want)
	return err
}

// targetHostFS serves absolute paths on a fork cluster's target, this machine's disk,
// through the target paths.
func (s *stager) targetHostFS(who scope) hostFS {
	return hostFS{roots: s.cfg.TargetPaths, protected: s.protected, cluster: who.cluster,
		principal: who.principal, refused: ErrTargetPath}
}

func (s *stager) hostFS(who scope) hostFS {
	return hostFS{roots: s.cfg.FileRoots, protected: s.protected, cluster: who.cluster, principal: who.principal}
}

// insideReal reports whether p, with the symbolic links that exist resolved, lies in
// dir on this machine.
func insideReal(dir, p string) bool {
	if !within(dir, p) {
		return false
	}
	realDir, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return true // not made yet: nothing in it can be a link
	}
	real, err := resolve(osFS{}, "/", p)
	return err == nil && within(filepath.ToSlash(realDir), real)
}

// cleanup removes one cleanup entry: a relative name in the job's directory, or an
// absolute path inside the job's directory or working directory; any other absolute
// path only inside a target path open for writing to the job (stager.target_paths).
func (s *stager) cleanup(ctx context.Context, st events.State, d dirs, name string) error {
	if !path.IsAbs(name) {
		n, err := localName(name)
		if err != nil {
			return err
		}
		return d.jd.removeAll(ctx, n)
	}
	clean := path.Clean(name)
	for _, in := range []struct {
		dir  string
		root workDir
	}{{d.jdPath, d.jd}, {d.wdPath, d.wd}} {
		if in.root != nil && within(in.dir, clean) {
			n, err := localName(strings.TrimPrefix(strings.TrimPrefix(clean, in.dir), "/"))
			if err != nil || n == "." {
				return errors.Join(err, fmt.Errorf("%w: %s is the job's directory itself", ErrCleanupPolicy, name))
			}
			return in.root.removeAll(ctx, n)
		}
	}
	return s.removeTargetPath(ctx, st, d.wd, clean)
}

// removeTargetPath removes an absolute path on the job's target inside a target path
// open for writing to the job, never a target path itself.
func (s *stager) removeTargetPath(ctx context.Context, st events.State, wd workDir, name string) error {
	who := scopeOf(st)
	if s.onGateway(st) {
		root, rel, _, err := s.targetHostFS(who).root(name, AccessWrite)
		if err != nil {
			return fmt.Errorf("%w: %w", ErrCleanupPolicy, err)
		}
		defer root.Close()
		if rel == "." {
			return fmt.Errorf("%w: %s is a target path itself", ErrCleanupPolicy, name)
		}
		return root.RemoveAll(filepath.FromSlash(rel))
	}
	sf, ok := wd.(*sftpFS)
	if !ok {
		return fmt.Errorf("%w: this target cannot reach absolute paths", ErrCleanupPolicy)
	}
	fs, rel, err := sftpTargetFS{c: sf, roots: s.cfg.TargetPaths, who: who}.within(name, AccessWrite)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrCleanupPolicy, err)
	}
	if rel == "." {
		return fmt.Errorf("%w: %s is a target path itself", ErrCleanupPolicy, name)
	}
	return fs.removeAll(ctx, rel)
}
