package stager

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"
)

// linkReader is what confinement needs of a file system: lstat and readlink.
type linkReader interface {
	Lstat(name string) (fs.FileInfo, error)
	ReadLink(name string) (string, error)
}

// maxLinkHops bounds symlink chains, as the kernel's ELOOP does.
const maxLinkHops = 40

// confine resolves name under root component by component, following symlinks the way
// the target system would, and refuses it if the path it finally denotes is outside
// root. Names that do not exist yet resolve lexically. root is an absolute, slash path.
func confine(fsys linkReader, root, name string) error {
	cur, err := resolve(fsys, root, name)
	if err != nil {
		return err
	}
	if !within(root, cur) {
		return fmt.Errorf("%w: %q resolves to %s, outside the working directory", ErrLocalName, name, cur)
	}
	return nil
}

// resolve follows name from base as the target system would, and returns the path it
// denotes.
func resolve(fsys linkReader, base, name string) (string, error) {
	cur, rest, hops := base, splitPath(name), 0
	for len(rest) > 0 {
		c := rest[0]
		rest = rest[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			cur = path.Dir(cur)
			continue
		}
		next := path.Join(cur, c)
		fi, err := fsys.Lstat(next)
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				return "", fmt.Errorf("checking %q: %w", name, err)
			}
			cur = path.Join(append([]string{next}, rest...)...)
			break
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			cur = next
			continue
		}
		if hops++; hops > maxLinkHops {
			return "", fmt.Errorf("%w: %q: too many symbolic links", ErrLocalName, name)
		}
		target, err := fsys.ReadLink(next)
		if err != nil {
			return "", fmt.Errorf("checking %q: %w", name, err)
		}
		if path.IsAbs(target) {
			cur = "/"
		}
		rest = append(splitPath(target), rest...)
	}
	return cur, nil
}

func splitPath(p string) []string { return strings.Split(p, "/") }

// within reports whether p is root or below it.
func within(root, p string) bool {
	root, p = path.Clean(root), path.Clean(p)
	return p == root || root == "/" || strings.HasPrefix(p, root+"/")
}
