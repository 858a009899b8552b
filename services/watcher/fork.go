package watcher

import (
	"context"
	"errors"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/pkg/target"
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
	if code, reason, ok := exitStatus(w.WorkDir); ok {
		return Observation{Exited: true, ExitCode: code, Reason: reason}
	}
	if alive(w.NativeID) {
		return Observation{}
	}
	// The process may have written its status between the two looks.
	if code, reason, ok := exitStatus(w.WorkDir); ok {
		return Observation{Exited: true, ExitCode: code, Reason: reason}
	}
	return Observation{Gone: true}
}

// exitStatus is the exit status the job's epilogue wrote in its working directory:
// gridwire's own file, else the one the GPE OS profile spec names.
func exitStatus(workDir string) (int, string, bool) {
	if code, reason, ok := target.ReadExitStatus(filepath.Join(workDir, events.ExitFile)); ok {
		return code, reason, true
	}
	return target.ReadExitStatus(filepath.Join(workDir, events.GPEExitFile))
}

func alive(nativeID string) bool {
	pid, err := strconv.Atoi(nativeID)
	if err != nil || pid <= 0 {
		return false
	}
	err = syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
