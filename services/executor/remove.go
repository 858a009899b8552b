package executor

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/pkg/target"
)

// Remover removes an ended attempt's working directory on the target: the profile's
// DELETE with the directory as its FILE, else removeDefault. It runs where the job's
// other control scripts run (this host for a fork cluster or a batch system's clients
// here, the job's host over SSH). A script that ran and failed is an Output with a
// non-zero exit; an error means it could not be run.
type Remover interface {
	Remove(ctx context.Context, st events.State, dir string) (out target.Output, script string, err error)
}

// removeDefault is what removes a directory when the profile has no DELETE.
const removeDefault = "default"

// ErrOutsideWorkRoot refuses to remove a directory that is not a job's directory under
// the cluster's work root.
var ErrOutsideWorkRoot = errors.New("executor: not a job directory under the cluster's work root")

// jobDir checks that dir is the job's own working directory directly under root: root's
// child named by the job's ID, or the ID with an attempt suffix (.N), as the incarnator
// makes it. Anything else (another job's, the root itself, a path with .. or a
// trailing slash) is refused before any script sees it.
func jobDir(root, jobID, dir string) error {
	clean := path.Clean(root)
	if root == "" || !path.IsAbs(clean) || clean == "/" {
		return fmt.Errorf("%w: no usable work root %q", ErrOutsideWorkRoot, root)
	}
	if dir != path.Clean(dir) || path.Dir(dir) != clean {
		return fmt.Errorf("%w: %q is not directly under %s", ErrOutsideWorkRoot, dir, clean)
	}
	base := path.Base(dir)
	if base == jobID {
		return nil
	}
	if n, ok := strings.CutPrefix(base, jobID+"."); ok {
		if a, err := strconv.Atoi(n); err == nil && a > 1 && strconv.Itoa(a) == n {
			return nil
		}
	}
	return fmt.Errorf("%w: %q is not job %s's directory", ErrOutsideWorkRoot, dir, jobID)
}

// removeScript is the script that removes dir for job st: the profile's DELETE (its FILE
// is GW_PATH, else GW_WORKDIR) or the default, every value set as a quoted variable.
func removeScript(st events.State, dir string) (body, script string) {
	vars := map[string]string{events.VarJobID: st.JobID, events.VarWorkDir: dir, "GW_PATH": dir,
		events.VarNativeID: st.NativeID}
	if st.Incarnation != nil {
		if d := st.Incarnation.Scripts[events.ScriptDelete]; d.Body != "" {
			return target.WithVars(vars, d.Body), events.ScriptDelete
		}
	}
	return target.WithVars(vars, `rm -rf -- "$`+events.VarWorkDir+`"`), removeDefault
}

// Remove implements Remover on this host, after the profile's static scripts are
// installed (a DELETE written as a static script).
func (f *ForkTarget) Remove(ctx context.Context, st events.State, dir string) (target.Output, string, error) {
	if st.Incarnation != nil && len(st.Incarnation.StaticScripts) > 0 {
		if err := installLocal(ctx, st.Incarnation.StaticScripts); err != nil {
			return target.Output{}, "", fmt.Errorf("installing static scripts for job %s: %w", st.JobID, err)
		}
	}
	body, script := removeScript(st, dir)
	out, err := target.Local{}.Run(ctx, body)
	return out, script, err
}

// Remove implements Remover on the host the job ran on (the one its incarnation chose
// when it never started), after the profile's static scripts are installed there.
func (s *ScriptTarget) Remove(ctx context.Context, st events.State, dir string) (target.Output, string, error) {
	sh := s.shellAt(st.Host, st)
	if st.Incarnation != nil {
		if err := s.installStatics(ctx, sh, st.Incarnation.StaticScripts); err != nil {
			return target.Output{}, "", fmt.Errorf("installing static scripts on %s: %w", sh.Host(), err)
		}
	}
	body, script := removeScript(st, dir)
	out, err := sh.Run(ctx, body)
	return out, script, err
}
