package watcher

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/gridwire/gridwire/events"
)

// ForkProber observes jobs run on this host: the exit status file written by the job's
// epilogue is the truth about the exit; a process that is gone without one is Gone.
type ForkProber struct{}

// Probe implements Prober.
func (ForkProber) Probe(_ context.Context, jobs []Watched) (map[string]Observation, error) {
	out := make(map[string]Observation, len(jobs))
	for _, w := range jobs {
		out[w.JobID] = probeFork(w)
	}
	return out, nil
}

func probeFork(w Watched) Observation {
	if code, ok := ReadExitStatus(w.WorkDir); ok {
		return Observation{Exited: true, ExitCode: code}
	}
	if alive(w.NativeID) {
		return Observation{}
	}
	// The process may have written its status between the two looks.
	if code, ok := ReadExitStatus(w.WorkDir); ok {
		return Observation{Exited: true, ExitCode: code}
	}
	return Observation{Gone: true}
}

// ReadExitStatus parses "<code>\n" from a job's exit status file; a missing, partial or
// malformed file is not an exit.
func ReadExitStatus(workDir string) (int, bool) {
	b, err := os.ReadFile(filepath.Join(workDir, events.ExitFile))
	if err != nil || len(b) < 2 || b[len(b)-1] != '\n' {
		return 0, false
	}
	code, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, false
	}
	return code, true
}

func alive(nativeID string) bool {
	pid, err := strconv.Atoi(nativeID)
	if err != nil || pid <= 0 {
		return false
	}
	err = syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
