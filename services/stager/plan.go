package stager

import (
	"fmt"
	"path"
	"strings"

	"github.com/gridwire/gridwire/events"
)

// Directions of a transfer.
const (
	DirIn  = "in"
	DirOut = "out"
)

// item is one entry of a staging plan: a file or directory to move and its budget. A
// name that cannot be staged (it leaves the working directory, has an unsupported
// scheme...) is an item with err set, so its refusal is recorded like any attempt.
type item struct {
	dir      string // DirIn or DirOut
	from, to string // as recorded in transfer events
	tree     bool   // a directory, copied recursively
	of       int    // attempts budget
	remote   remote
	local    string // name in the working directory, or an absolute path on the target (abs)
	abs      bool   // local is an absolute path on the target, within Config.TargetPaths
	exec     bool   // the job's program: made executable once staged
	// stdio: the local end is in gridwire's control directory (stdin, stdout, stderr),
	// not in the job's directory.
	stdio bool
	// jobFile is a stdout or stderr destination that is a file in the job's directory
	// (a relative plain path when the job has no default_storage_base).
	jobFile string
	err     error
}

// key identifies an item's attempt records among a job's transfers.
func (it item) key() string { return it.dir + "\x00" + it.from + "\x00" + it.to }

func keyOf(t events.TransferData) string { return t.Direction + "\x00" + t.From + "\x00" + t.To }

// budget is a file's attempts: its own, else the job's, else the configured default.
func budget(f events.FileCopy, job events.Job, def int) int {
	switch {
	case f.Attempts > 0:
		return f.Attempts
	case job.MaxTransferAttempts > 0:
		return job.MaxTransferAttempts
	}
	return def
}

// planIn lists what stage-in moves: stdin, then the job's stage-in entries.
func planIn(job events.Job, def int, plug schemeSet) []item {
	var items []item
	if job.Stdin != "" {
		items = append(items, inItem(events.FileCopy{From: job.Stdin, To: events.StdinFile}, job, def, true, plug))
	}
	for _, f := range job.StageIn {
		items = append(items, inItem(f, job, def, false, plug))
	}
	return dedup(items)
}

// dedup drops repeated entries (the same file to the same place): their attempts would
// share one record key.
func dedup(items []item) []item {
	seen := map[string]bool{}
	out := items[:0]
	for _, it := range items {
		if !seen[it.key()] {
			seen[it.key()] = true
			out = append(out, it)
		}
	}
	return out
}

func inItem(f events.FileCopy, job events.Job, def int, stdio bool, plug schemeSet) item {
	it := item{dir: DirIn, from: f.From, to: f.To, of: budget(f, job, def), stdio: stdio}
	r, err := resolveRemote(f.From, job.DefaultStorageBase, plug)
	if err == nil {
		it.from, it.remote, it.tree = r.raw, r, r.dir || f.Directory
	}
	it.local, it.err = f.To, err
	if err == nil && !stdio {
		it.local, it.abs, it.err = nodeName(f.To)
	}
	it.exec = !stdio && !it.tree && it.err == nil &&
		(isProgram(job.Executable, it.local) || it.abs && path.Clean(job.Executable) == it.local)
	if it.err == nil && it.tree && !listable(r.url.Scheme) {
		it.err = fmt.Errorf("%w: %q: a %s directory cannot be listed", ErrRemote, f.From, r.url.Scheme)
	}
	return it
}

// planOut lists what stage-out moves for a job that exited with the given success:
// stdout and stderr to each destination, then the stage-out entries whose When fits.
func planOut(job events.Job, def int, success bool, plug schemeSet) []item {
	var items []item
	for _, d := range job.Stdout {
		items = append(items, outItem(events.FileCopy{From: events.StdoutFile, To: d}, job, def, true, plug))
	}
	for _, d := range job.Stderr {
		items = append(items, outItem(events.FileCopy{From: events.StderrFile, To: d}, job, def, true, plug))
	}
	for _, f := range job.StageOut {
		if wanted(f.When, success) {
			items = append(items, outItem(f, job, def, false, plug))
		}
	}
	return dedup(items)
}

func wanted(when string, success bool) bool {
	switch when {
	case WhenSuccess:
		return success
	case WhenFailure:
		return !success
	}
	return true
}

func outItem(f events.FileCopy, job events.Job, def int, stdio bool, plug schemeSet) item {
	it := item{dir: DirOut, from: f.From, to: f.To, of: budget(f, job, def), local: f.From, stdio: stdio}
	if !stdio {
		it.local, it.abs, it.err = nodeName(f.From)
	}
	if stdio && isJobFile(f.To, job.DefaultStorageBase) {
		it.jobFile, it.err = localName(f.To)
		return it
	}
	r, err := resolveRemote(f.To, job.DefaultStorageBase, plug)
	if err == nil {
		it.to, it.remote, it.tree = r.raw, r, r.dir || f.Directory
	}
	if it.err == nil {
		it.err = err
	}
	if it.err == nil && f.When != "" {
		it.err = checkWhen(f.When)
	}
	return it
}

// nodeName checks a name on the compute node: a name in the working directory, or an
// absolute path the target paths must open when it is staged.
func nodeName(name string) (string, bool, error) {
	if path.IsAbs(name) {
		n, err := targetName(name)
		return n, true, err
	}
	n, err := localName(name)
	return n, false, err
}

// files is the plan as recorded in a staging event.
func files(items []item) []events.FileCopy {
	out := make([]events.FileCopy, len(items))
	for i, it := range items {
		out[i] = events.FileCopy{From: it.from, To: it.to, Directory: it.tree, Attempts: it.of}
	}
	return out
}

// progress is what a job's records say about an item: attempts made, whether one
// succeeded, and the last record.
type progress struct {
	attempts int
	done     bool
	last     *events.TransferData
}

func progressOf(transfers []events.TransferData, key string) progress {
	var p progress
	for i := range transfers {
		t := &transfers[i]
		if keyOf(*t) != key {
			continue
		}
		p.attempts++
		p.last = t
		if t.Error == "" {
			p.done = true
		}
	}
	return p
}

// exhausted reports whether the records leave the item no attempt.
func (p progress) exhausted(of int) bool {
	return !p.done && p.last != nil && (p.last.Permanent || p.attempts >= of)
}

// isProgram reports whether a staged name is the job's executable (which the v3
// description says must be executable there when it is passed in input_files).
func isProgram(executable, local string) bool {
	if executable == "" || strings.HasPrefix(executable, "/") {
		return false
	}
	clean, err := localName(executable)
	return err == nil && clean == local
}

// isJobFile reports whether a stdout or stderr destination names a file in the job's
// directory: a relative plain path with no default_storage_base to resolve it against
// (JRDL's <stdout><path>STDOUT</path>, a file on the execution host as in GRAM).
func isJobFile(dest, base string) bool {
	return base == "" && !events.HasScheme(dest) && !strings.HasPrefix(dest, "/")
}
