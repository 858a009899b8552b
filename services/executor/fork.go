package executor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gridwire/gridwire/events"
	"github.com/nats-io/nats.go"
)

// ForkTarget runs jobs on this host, detached from the executor: each job's script runs
// under /bin/sh in a new session, so stopping or killing the executor leaves it running.
// The job's own epilogue writes its exit status file; that file is the truth about the
// exit, not the executor.
type ForkTarget struct {
	Cluster string
	Hints   *nats.Conn // when set, an exit hint is published as soon as a child is reaped
	Logger  *slog.Logger
	// StaleLock is how long a start lock without a native ID marker is trusted to belong
	// to a start still in progress; after it the earlier attempt is taken as dead.
	StaleLock time.Duration
}

// errStartInProgress asks for a redelivery: another attempt holds the start lock.
var errStartInProgress = errors.New("executor: another start of this job is in progress")

const startLock = events.ControlDir + "/start.lock"

// Start implements Target.
func (f *ForkTarget) Start(ctx context.Context, st events.State) (events.StartedData, error) {
	inc := st.Incarnation
	if inc == nil || inc.WorkDir == "" || !filepath.IsAbs(inc.WorkDir) {
		return events.StartedData{}, fmt.Errorf("job %s has no absolute working directory", st.JobID)
	}
	script, ok := inc.Scripts[events.ScriptJob]
	if !ok || script.Body == "" {
		return events.StartedData{}, fmt.Errorf("job %s has no %s script", st.JobID, events.ScriptJob)
	}
	wd := inc.WorkDir
	if err := os.MkdirAll(filepath.Join(wd, events.ControlDir), 0o700); err != nil {
		return events.StartedData{}, err
	}
	if pid, ok := readMarker(wd); ok {
		return f.started(pid, true), nil
	}
	if err := f.takeLock(wd); err != nil {
		return events.StartedData{}, err
	}
	if err := writeFileAtomic(filepath.Join(wd, events.ScriptFile), []byte(script.Body), 0o700); err != nil {
		return events.StartedData{}, err
	}
	// The child records its own PID before anything else, so a run exists on disk the
	// moment it exists at all, whatever happens to this process; then it sources the job
	// script in the same shell (no second exec).
	cmd := exec.Command("/bin/sh", "-c", "echo $$ >"+events.StartMarker+" && . ./"+events.ScriptFile)
	cmd.Dir = wd
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + os.Getenv("HOME"), events.VarJobID + "=" + st.JobID,
		events.VarWorkDir + "=" + wd}
	if err := cmd.Start(); err != nil {
		_ = os.Remove(filepath.Join(wd, startLock))
		return events.StartedData{}, fmt.Errorf("spawning job %s: %w", st.JobID, err)
	}
	pid := strconv.Itoa(cmd.Process.Pid)
	go f.reap(cmd, st.JobID)
	return f.started(pid, false), nil
}

func (f *ForkTarget) started(pid string, adopted bool) events.StartedData {
	host, _ := os.Hostname()
	return events.StartedData{Cluster: f.Cluster, Host: host, NativeID: pid, Running: true, Adopted: adopted}
}

// takeLock marks that a start is being attempted. A lock left by an attempt that died
// before spawning anything is taken over once it is stale.
func (f *ForkTarget) takeLock(wd string) error {
	path := filepath.Join(wd, startLock)
	for range 2 {
		fh, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
		if err == nil {
			return fh.Close()
		}
		if !errors.Is(err, os.ErrExist) {
			return err
		}
		fi, serr := os.Stat(path)
		stale := f.StaleLock
		if stale <= 0 {
			stale = 10 * time.Second
		}
		if serr != nil || time.Since(fi.ModTime()) < stale {
			return errStartInProgress
		}
		// The earlier attempt took the lock but wrote no marker for longer than any spawn
		// takes: it died before starting the job. Check once more, then take over.
		if _, ok := readMarker(wd); ok {
			return errStartInProgress
		}
		_ = os.Remove(path)
	}
	return errStartInProgress
}

// reap waits for the child so it does not linger as a zombie, then hints the watcher.
func (f *ForkTarget) reap(cmd *exec.Cmd, jobID string) {
	_ = cmd.Wait()
	if f.Hints != nil && !f.Hints.IsClosed() {
		_ = f.Hints.Publish(events.HintSubject("exit", f.Cluster), []byte(jobID))
	}
}

// readMarker returns the native ID recorded in the job's working directory.
func readMarker(wd string) (string, bool) {
	b, err := os.ReadFile(filepath.Join(wd, events.StartMarker))
	if err != nil || len(b) == 0 || b[len(b)-1] != '\n' {
		return "", false
	}
	id := strings.TrimSpace(string(b))
	return id, id != ""
}

func writeFileAtomic(path string, data []byte, mode os.FileMode) error {
	tmp := fmt.Sprintf("%s.tmp%d", path, time.Now().UnixNano())
	if err := os.WriteFile(tmp, data, mode); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return nil
}
