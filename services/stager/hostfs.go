package stager

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"syscall"

	"go.yaml.in/yaml/v3"
)

// Access says what jobs may do in a file root.
const (
	AccessRead      = "read"       // stage in from it (the default)
	AccessWrite     = "write"      // stage out (and stdout, stderr) to it
	AccessReadWrite = "read-write" // both
)

// PrincipalPlaceholder in a file root's path is replaced by the job's submitter, so one
// entry gives every principal a directory of its own.
const PrincipalPlaceholder = "{principal}"

// FileRoot is one directory on the gateway that jobs may name with file:// URLs and
// absolute paths. With no roots configured no job may name a gateway file at all.
type FileRoot struct {
	// Path is absolute; {principal} stands for the job's submitter.
	Path string `yaml:"path"`
	// Access is read (the default), write or read-write.
	Access string `yaml:"access,omitempty"`
	// Clusters limits the root to jobs of these clusters; empty means every cluster.
	Clusters []string `yaml:"clusters,omitempty"`
	// Principals limits the root to jobs of these submitters; empty means every one.
	Principals []string `yaml:"principals,omitempty"`
	// Storage, in a target path instead of Path, names a storage of the job's OS profile
	// (HOME, SCRATCH, USPACE, ...): the root is that storage's path for the job.
	Storage string `yaml:"storage,omitempty"`
}

// UnmarshalYAML reads a root given as a plain path (read access, every job) or in full.
func (r *FileRoot) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		return n.Decode(&r.Path)
	}
	type plain FileRoot
	return n.Decode((*plain)(r))
}

func (r FileRoot) access() string { return cmpOr(r.Access, AccessRead) }

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func (r FileRoot) validate(where string) error {
	if r.Storage != "" {
		return errors.New(where + ".storage: only a target path may name a storage")
	}
	return r.validatePath(where)
}

// validateTarget checks a target path: a Path as a file root's, or a Storage instead.
func (r FileRoot) validateTarget(where string) error {
	if r.Storage == "" {
		return r.validatePath(where)
	}
	if r.Path != "" {
		return errors.New(where + ": path and storage exclude each other")
	}
	r.Path = "/storage"
	return r.validatePath(where)
}

func (r FileRoot) validatePath(where string) error {
	var errs []error
	p := strings.ReplaceAll(r.Path, PrincipalPlaceholder, "x")
	switch {
	case !filepath.IsAbs(r.Path):
		errs = append(errs, fmt.Errorf("%s.path: %q is not absolute", where, r.Path))
	case filepath.Clean(p) != p || p == "/":
		errs = append(errs, fmt.Errorf("%s.path: %q must be clean (no .., //, trailing /) and not /", where, r.Path))
	case strings.ContainsFunc(r.Path, isControl):
		errs = append(errs, fmt.Errorf("%s.path: %q holds a control character", where, r.Path))
	}
	switch r.access() {
	case AccessRead, AccessWrite, AccessReadWrite:
	default:
		errs = append(errs, fmt.Errorf("%s.access: %q is not read, write or read-write", where, r.Access))
	}
	return errors.Join(errs...)
}

// allows reports whether the root serves a job of cluster and principal for want
// (AccessRead or AccessWrite), and the path it stands for then.
func (r FileRoot) allows(cluster, principal, want string) (string, bool) {
	if a := r.access(); a != want && a != AccessReadWrite {
		return "", false
	}
	if len(r.Clusters) > 0 && !slices.Contains(r.Clusters, cluster) {
		return "", false
	}
	if len(r.Principals) > 0 && !slices.Contains(r.Principals, principal) {
		return "", false
	}
	if !strings.Contains(r.Path, PrincipalPlaceholder) {
		return r.Path, true
	}
	if !principalPath.MatchString(principal) || principal == "." || principal == ".." {
		return "", false // a principal that is no safe path segment gets no directory
	}
	return strings.ReplaceAll(r.Path, PrincipalPlaceholder, principal), true
}

var principalPath = regexp.MustCompile(`^[A-Za-z0-9._@-]{1,128}$`)

// ErrFileRoot refuses a gateway file that no configured file root opens to the job.
var ErrFileRoot = errors.New("stager: file refused by the file-root policy (stager.file_roots)")

// ErrProtected refuses a gateway file inside the gateway's own data, config or keys.
var ErrProtected = errors.New("stager: file refused: it is the gateway's own data, config or keys (stager.protected)")

// hostFS serves file:// URLs and absolute plain paths: files on the gateway's own disk,
// each inside a root the operator opened to the job's cluster and principal, never
// inside a protected path. Names resolve through an os.Root (no symlink, .. or race
// leaves it) and the file opened must be the one checked.
type hostFS struct {
	roots              []FileRoot
	protected          []string // resolved absolute paths
	cluster, principal string
	// refused is the error a name outside every root wraps: ErrFileRoot when nil,
	// ErrTargetPath when the roots are a fork cluster's target paths.
	refused error
}

func (h hostFS) refusal() error {
	if h.refused != nil {
		return h.refused
	}
	return ErrFileRoot
}

// root finds the root that opens name to the job for want (AccessRead or AccessWrite),
// checks where name resolves, and returns the opened root, name relative to it, and
// the resolved path.
func (h hostFS) root(name, want string) (*os.Root, string, string, error) {
	if strings.ContainsFunc(name, isControl) {
		return nil, "", "", fmt.Errorf("%w: %q holds a control character", h.refusal(), name)
	}
	if !path.IsAbs(name) || slices.Contains(strings.Split(name, "/"), "..") {
		return nil, "", "", fmt.Errorf("%w: %q must be absolute and without '..'", h.refusal(), name)
	}
	type cand struct{ dir, rel string }
	var cands []cand
	for _, r := range h.roots {
		dir, ok := r.allows(h.cluster, h.principal, want)
		if ok && (strings.HasPrefix(name, dir+"/") || name == dir) {
			cands = append(cands, cand{dir, strings.TrimLeft(strings.TrimPrefix(name, dir), "/")})
		}
	}
	if len(cands) == 0 {
		return nil, "", "", fmt.Errorf("%w: %s is in no root open to %s for cluster %q and principal %q",
			h.refusal(), name, verbOf(want), h.cluster, h.principal)
	}
	sort.Slice(cands, func(i, j int) bool { return len(cands[i].dir) > len(cands[j].dir) })
	c := cands[0]
	if c.rel == "" {
		c.rel = "."
	}
	real, err := filepath.EvalSymlinks(c.dir)
	if err != nil {
		return nil, "", "", fmt.Errorf("%w: root %s: %v", h.refusal(), c.dir, err)
	}
	target, err := resolve(osFS{}, real, c.rel)
	if err != nil {
		return nil, "", "", err
	}
	if !within(real, target) {
		return nil, "", "", fmt.Errorf("%w: %s resolves to %s, outside its root %s", h.refusal(), name, target, c.dir)
	}
	for _, p := range h.protected {
		if within(p, target) {
			return nil, "", "", fmt.Errorf("%w: %s (%s) is within %s", ErrProtected, name, target, p)
		}
	}
	root, err := os.OpenRoot(real)
	if err != nil {
		return nil, "", "", fmt.Errorf("%w: opening root %s: %v", h.refusal(), c.dir, err)
	}
	return root, c.rel, target, nil
}

func verbOf(want string) string {
	if want == AccessWrite {
		return "writing"
	}
	return "reading"
}

// check reports whether name may be opened for want.
func (h hostFS) check(name, want string) error {
	root, _, _, err := h.root(name, want)
	if err == nil {
		root.Close()
	}
	return err
}

// same refuses a file opened through the root that is not the one checked (a name
// swapped between check and open) or that has other names (a hard link to a file
// elsewhere, which writing would change and reading would leak).
func same(f *os.File, target string) error {
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	want, err := os.Stat(target)
	if err != nil || !os.SameFile(fi, want) {
		return fmt.Errorf("%w: %s changed while it was opened", ErrFileRoot, target)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%w: %s is not a regular file", ErrFileRoot, target)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Nlink > 1 {
		return fmt.Errorf("%w: %s has %d hard links; staging refuses files with several names", ErrFileRoot, target, st.Nlink)
	}
	return nil
}

func (h hostFS) open(ctx context.Context, name string) (io.ReadCloser, int64, error) {
	root, rel, target, err := h.root(name, AccessRead)
	if err != nil {
		return nil, 0, err
	}
	defer root.Close()
	// O_NONBLOCK: a FIFO swapped in must not hang the open.
	f, err := root.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, 0, err
	}
	if err := same(f, target); err != nil {
		f.Close()
		return nil, 0, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	return f, fi.Size(), nil
}

func (h hostFS) put(ctx context.Context, name string, r io.Reader, size int64) error {
	f, err := h.writeFile(ctx, name)
	if err != nil {
		return err
	}
	return errors.Join(copyBuffered(f, r), f.Close())
}

func (h hostFS) writeFile(ctx context.Context, name string) (io.WriteCloser, error) {
	root, rel, target, err := h.root(name, AccessWrite)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	if dir := path.Dir(rel); dir != "." {
		if err := root.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
	}
	// Not O_TRUNC: the file is truncated only once it is known to be the one checked.
	f, err := root.OpenFile(rel, os.O_WRONLY|os.O_CREATE|syscall.O_NONBLOCK, 0o644)
	if err != nil {
		return nil, err
	}
	if err := same(f, target); err != nil {
		f.Close()
		return nil, err
	}
	if err := f.Truncate(0); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

func (h hostFS) list(ctx context.Context, dir string) ([]string, error) {
	dir = strings.TrimSuffix(dir, "/")
	root, rel, _, err := h.root(dir, AccessRead)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	return walkFS(root.FS(), rel)
}

// isControl reports a character no file name or shell word of a job may carry: NUL and
// the other C0 controls, DEL, and the C1 controls.
func isControl(r rune) bool { return r < 0x20 || r == 0x7f || r >= 0x80 && r < 0xa0 }

// protectedPaths resolves the paths staging never touches; a path that does not exist
// yet is kept as given (made absolute).
func protectedPaths(paths []string) []string {
	var out []string
	for _, p := range paths {
		if p == "" {
			continue
		}
		abs, err := filepath.Abs(p)
		if err != nil {
			continue
		}
		out = append(out, filepath.ToSlash(abs))
		if real, err := filepath.EvalSymlinks(abs); err == nil && real != abs {
			out = append(out, filepath.ToSlash(real))
		}
	}
	return out
}

// makeExecutable sets a staged file's mode to 0755 (the job's program, staged to an
// absolute path on a fork cluster's target).
func (h hostFS) makeExecutable(ctx context.Context, name string) error {
	root, rel, _, err := h.root(name, AccessWrite)
	if err != nil {
		return err
	}
	defer root.Close()
	return root.Chmod(rel, 0o755)
}
