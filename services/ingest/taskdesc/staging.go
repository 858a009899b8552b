package taskdesc

import (
	"strings"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/services/ingest/internal/tree"
)

// stage resolves files and standard streams against default_storage_base.
func (d *decoder) stage(job *events.Job) {
	base := ""
	if d.base != nil {
		base = d.base.Text
		if !hasScheme(base) {
			d.list.Addf(d.base.Line, d.base.Col, "default_storage_base", "%q is not an absolute URI (scheme://...)", base)
			return
		}
		job.DefaultStorageBase = base
	}
	for _, e := range d.inputs {
		if remote, ok := d.resolve(base, e.remote, e.node, e.field); ok {
			job.StageIn = append(job.StageIn, events.FileCopy{From: remote, To: e.local,
				Directory: strings.HasSuffix(remote, "/"), Attempts: d.attempts})
		}
	}
	for _, e := range d.outputs {
		if remote, ok := d.resolve(base, e.remote, e.node, e.field); ok {
			job.StageOut = append(job.StageOut, events.FileCopy{From: e.local, To: remote,
				Directory: strings.HasSuffix(remote, "/"), Attempts: d.attempts})
		}
	}
	if d.stdin != nil {
		job.Stdin, _ = d.resolve(base, d.stdin.Text, d.stdin, "stdin")
	}
	if d.stdout != nil {
		if s, ok := d.resolve(base, d.stdout.Text, d.stdout, "stdout"); ok {
			job.Stdout = []string{s}
		}
	}
	if d.stderr != nil {
		if s, ok := d.resolve(base, d.stderr.Text, d.stderr, "stderr"); ok {
			job.Stderr = []string{s}
		}
	}
}

func (d *decoder) resolve(base, ref string, v *tree.Node, field string) (string, bool) {
	if hasScheme(ref) {
		return ref, true
	}
	if base == "" {
		// A plain path with no base stays a plain path: `gridwire submit` uploads such
		// inputs from the submitter's disk, and the stager's submission check refuses
		// what cannot be staged (a relative remote name with nothing to resolve it by).
		return ref, true
	}
	return Resolve(base, ref), true
}

// hasScheme reports whether s starts with an RFC 3986 scheme and "://" or ":".
func hasScheme(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
		case i > 0 && (c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.'):
		case i > 0 && c == ':':
			return true
		default:
			return false
		}
	}
	return false
}

// Resolve resolves a path against a base URI as RFC 3986 section 5.2 does for a
// reference without scheme, authority, query or fragment: an absolute path replaces the
// base's path, a relative one replaces its last segment, and dot segments are removed.
// Braces are kept as written, so placeholders survive resolution.
func Resolve(base, ref string) string {
	if i := strings.IndexAny(base, "?#"); i >= 0 {
		base = base[:i]
	}
	prefix, basePath := base, ""
	if i := strings.Index(base, "://"); i >= 0 {
		if j := strings.IndexByte(base[i+3:], '/'); j >= 0 {
			prefix, basePath = base[:i+3+j], base[i+3+j:]
		}
	} else if i := strings.IndexByte(base, ':'); i >= 0 {
		prefix, basePath = base[:i+1], base[i+1:]
	}
	var merged string
	switch {
	case strings.HasPrefix(ref, "/"):
		merged = ref
	case basePath == "" && strings.Contains(base, "://"):
		merged = "/" + ref
	default:
		merged = basePath[:strings.LastIndexByte(basePath, '/')+1] + ref
	}
	return prefix + removeDotSegments(merged)
}

func removeDotSegments(p string) string {
	if !hasDotSegment(p) {
		return p
	}
	segs := strings.Split(p, "/")
	out := make([]string, 0, len(segs))
	for i, s := range segs {
		last := i == len(segs)-1
		switch s {
		case ".":
			if last {
				out = append(out, "")
			}
		case "..":
			if len(out) > 1 {
				out = out[:len(out)-1]
			}
			if last {
				out = append(out, "")
			}
		default:
			out = append(out, s)
		}
	}
	return strings.Join(out, "/")
}

// hasDotSegment reports whether a path has a "." or ".." segment.
func hasDotSegment(p string) bool {
	for _, seg := range [...]string{"/./", "/../"} {
		if strings.Contains(p, seg) {
			return true
		}
	}
	for _, seg := range [...]string{"./", "../"} {
		if strings.HasPrefix(p, seg) {
			return true
		}
	}
	return p == "." || p == ".." || strings.HasSuffix(p, "/.") || strings.HasSuffix(p, "/..")
}

// placeholdersUsed lists the v3 placeholders that occur where the spec substitutes.
func placeholdersUsed(job *events.Job) []string {
	var found [3]bool // indexed as Placeholders
	note := func(s string) {
		if strings.IndexByte(s, '{') < 0 {
			return
		}
		for i, p := range Placeholders {
			found[i] = found[i] || strings.Contains(s, "{"+p+"}")
		}
	}
	note(job.DefaultStorageBase)
	note(job.Executable)
	note(job.Stdin)
	for _, list := range [][]string{job.Arguments, job.Stdout, job.Stderr} {
		for _, s := range list {
			note(s)
		}
	}
	for _, e := range job.Environment {
		note(e.Value)
	}
	for _, list := range [][]events.FileCopy{job.StageIn, job.StageOut} {
		for _, c := range list {
			note(c.From)
			note(c.To)
		}
	}
	var used []string
	for i, n := range Placeholders {
		if found[i] {
			used = append(used, n)
		}
	}
	return used
}
