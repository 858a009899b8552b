package executor

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/pkg/target"
	"github.com/nats-io/nats.go"
	"golang.org/x/sys/unix"
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
	// RunAs, when set, is the unprivileged user jobs run as: the working directory is
	// handed to it before the job starts. Nil runs jobs as the gateway's user.
	RunAs *RunAs
	// Properties, when set, gives DDS tasks the way to the property API.
	Properties *Properties
}

// errStartInProgress asks for a redelivery: another attempt owns the job's start.
var errStartInProgress = errors.New("executor: another start of this job is in progress")

// maxInlineScript is the largest script passed to sh -c; a larger one is written to the
// job's script file first (the kernel caps one argument at 128 KiB).
const maxInlineScript = 96 << 10

// Start implements Target. Creating the job's native ID marker (empty, exclusively) is
// the start lock: the attempt that creates it starts the job; any later attempt adopts
// the run recorded in it. The child writes its own PID into the marker before anything
// else, so a run exists on disk the moment it exists at all, whatever happens to this
// process.
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
	if err := f.lockWaiting(ctx, wd); err != nil {
		if pid, ok := readMarker(wd); ok {
			return f.started(pid, true), nil
		}
		return events.StartedData{}, err
	}
	env, err := f.Properties.env(ctx, st, nil, false)
	var cmd *exec.Cmd
	if err == nil {
		cmd, err = f.command(wd, st.JobID, script.Body, env)
	}
	if err == nil {
		err = f.RunAs.hand(wd)
	}
	if err != nil {
		_ = os.Remove(filepath.Join(wd, events.StartMarker))
		return events.StartedData{}, err
	}
	pidfd := -1
	cmd.SysProcAttr.PidFD = &pidfd
	if err := cmd.Start(); err != nil {
		// Nothing runs: give the lock back so a retry starts cleanly.
		_ = os.Remove(filepath.Join(wd, events.StartMarker))
		return events.StartedData{}, fmt.Errorf("spawning job %s: %w", st.JobID, err)
	}
	// The PID is read before the reaper starts: once the job has ended, the reaper's
	// Release sets cmd.Process.Pid to -1, and a job as quick as /bin/true can end at once.
	pid := strconv.Itoa(cmd.Process.Pid)
	go f.reap(cmd, pidfd, st.JobID)
	return f.started(pid, false), nil
}

// command is /bin/sh in a new session, in the working directory, recording its PID
// first and then running the job script in the same shell (no second exec).
func (f *ForkTarget) command(wd, jobID, body string, env []events.EnvVar) (*exec.Cmd, error) {
	marker := "echo $$ >" + events.StartMarker + " || exit 112\n"
	arg := marker + body
	if len(body) > maxInlineScript {
		if err := writeFileAtomic(filepath.Join(wd, events.ScriptFile), []byte(body), 0o700); err != nil {
			return nil, err
		}
		arg = marker + ". ./" + events.ScriptFile + "\n"
	}
	null, err := devNull()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command("/bin/sh", "-c", arg)
	cmd.Dir = wd
	cmd.Stdin, cmd.Stdout, cmd.Stderr = null, null, null
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	home, logname := os.Getenv("HOME"), ""
	if u, err := user.Current(); err == nil {
		logname = u.Username
	}
	if f.RunAs != nil {
		cmd.SysProcAttr.Credential, home, logname = f.RunAs.Credential, f.RunAs.Home, f.RunAs.User
	}
	// LOGNAME, as a login would set it: the JOB script reads the account's name from it
	// (a profile's USER_NAME) instead of forking id -un for every job.
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + home, "LOGNAME=" + logname,
		events.VarJobID + "=" + jobID, events.VarWorkDir + "=" + wd}
	for _, v := range env {
		cmd.Env = append(cmd.Env, v.Name+"="+v.Value)
	}
	return cmd, nil
}

func (f *ForkTarget) started(pid string, adopted bool) events.StartedData {
	return events.StartedData{Cluster: f.Cluster, Host: hostName(), NativeID: pid, Running: true, Adopted: adopted}
}

// lockWaiting takes the start lock, waiting while another attempt holds it: until its
// run records a PID (adopted by the caller), or until the lock is old enough to be
// deemed abandoned (taken over). A process killed just after taking the lock leaves it
// empty; its redelivered job must wait out StaleLock here, not spend the delivery
// budget meant for real failures and end FAILED without ever running. The wait is
// bounded by twice StaleLock and by ctx.
func (f *ForkTarget) lockWaiting(ctx context.Context, wd string) error {
	deadline := time.Now().Add(2 * f.stale())
	for {
		err := f.lock(wd)
		if !errors.Is(err, errStartInProgress) || time.Now().After(deadline) {
			return err
		}
		if _, ok := readMarker(wd); ok {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(min(f.stale()/10, 500*time.Millisecond)):
		}
	}
}

// lock creates the empty native ID marker. If an earlier attempt created it but no run
// has written its PID there for longer than any spawn takes, that attempt died before
// starting the job: its marker is moved aside (one racer wins the rename) and the lock
// retaken.
func (f *ForkTarget) lock(wd string) error {
	path := filepath.Join(wd, events.StartMarker)
	err := createExclusive(path)
	if errors.Is(err, fs.ErrNotExist) {
		// The stager normally made the working directory and its control directory
		// before the job was queued; make whatever is missing. Trying the lock first
		// spares every job a mkdir that finds the directory there.
		if err := os.MkdirAll(filepath.Join(wd, events.ControlDir), 0o700); err != nil {
			return err
		}
		err = createExclusive(path)
	}
	if err == nil || !errors.Is(err, os.ErrExist) {
		return err
	}
	if _, ok := readMarker(wd); ok {
		return errStartInProgress
	}
	stale := f.stale()
	fi, err := os.Stat(path)
	if err != nil || time.Since(fi.ModTime()) < stale {
		return errStartInProgress
	}
	if err := os.Rename(path, fmt.Sprintf("%s.abandoned-%d", path, time.Now().UnixNano())); err != nil {
		return errStartInProgress
	}
	if f.Logger != nil {
		f.Logger.Warn("took over an abandoned start", "dir", wd)
	}
	if err := createExclusive(path); err != nil {
		return errStartInProgress
	}
	return nil
}

// createExclusive creates an empty file that must not exist yet. It goes to the kernel
// directly: an *os.File would add five fcntl and epoll calls to the open and close
// that the lock is, on every job's start.
func createExclusive(path string) error {
	var fd int
	err := ignoringEINTR(func() (err error) {
		fd, err = syscall.Open(path, syscall.O_CREAT|syscall.O_EXCL|syscall.O_WRONLY|syscall.O_CLOEXEC, 0o600)
		return err
	})
	if err != nil {
		return &fs.PathError{Op: "open", Path: path, Err: err}
	}
	if err := syscall.Close(fd); err != nil {
		return &fs.PathError{Op: "close", Path: path, Err: err}
	}
	return nil
}

func ignoringEINTR(fn func() error) error {
	for {
		if err := fn(); !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}

// devNull is the job's stdin, stdout and stderr, opened once for the process: os/exec
// would open /dev/null three times per job otherwise, each open with its fcntl and
// epoll calls. The job script redirects its program's output to files of its own.
var devNull = sync.OnceValues(func() (*os.File, error) { return os.OpenFile(os.DevNull, os.O_RDWR, 0) })

// hostName is this host's name, read once: started events name it, and os.Hostname
// reads /proc each time.
var hostName = sync.OnceValue(func() string {
	h, _ := os.Hostname()
	return h
})

// reap waits for the child so it does not linger as a zombie, then hints the watcher.
// The kernel says when it exits: its pidfd, watched by the runtime's poller, so a
// running job holds no thread (cmd.Wait blocks one in waitid for the job's whole run:
// ten thousand running jobs would pass Go's limit of threads and end the process).
// Where the kernel gave no pidfd, cmd.Wait does it.
func (f *ForkTarget) reap(cmd *exec.Cmd, pidfd int, jobID string) {
	if pidfd < 0 || !reapPidfd(pidfd) {
		_ = cmd.Wait()
	} else {
		_ = cmd.Process.Release()
	}
	if f.Hints != nil && !f.Hints.IsClosed() {
		_ = f.Hints.Publish(events.HintSubject("exit", f.Cluster), []byte(jobID))
	}
}

// reapPidfd waits, without a thread, until the child behind pidfd has exited, and reaps
// it; it closes pidfd. False: the child was not reaped here (it is the caller's to
// wait for).
func reapPidfd(pidfd int) bool {
	if err := syscall.SetNonblock(pidfd, true); err != nil {
		_ = syscall.Close(pidfd)
		return false
	}
	fd := os.NewFile(uintptr(pidfd), "pidfd")
	defer fd.Close()
	rc, err := fd.SyscallConn()
	if err != nil {
		return false
	}
	reaped := false
	err = rc.Read(func(fd uintptr) bool {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_PIDFD, int(fd), &info, unix.WEXITED|unix.WNOHANG, nil)
		switch {
		case err == syscall.EINTR || err == syscall.EAGAIN || err == nil && info.Signo == 0:
			return false // still running: wait until the pidfd is readable
		case err == nil:
			reaped = true
		}
		return true
	})
	return err == nil && reaped
}

// FindRun implements RunFinder: the run whose PID an earlier attempt's child wrote into
// the native ID marker. An empty marker younger than StaleLock is a start in progress;
// an older one was abandoned before anything ran.
func (f *ForkTarget) FindRun(_ context.Context, st events.State) (events.StartedData, bool, error) {
	if st.Incarnation == nil || st.Incarnation.WorkDir == "" {
		return events.StartedData{}, false, nil
	}
	wd := st.Incarnation.WorkDir
	if pid, ok := readMarker(wd); ok {
		return f.started(pid, true), true, nil
	}
	fi, err := os.Stat(filepath.Join(wd, events.StartMarker))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return events.StartedData{}, false, nil
	case err != nil:
		return events.StartedData{}, false, err
	case time.Since(fi.ModTime()) < f.stale():
		return events.StartedData{}, false, errStartInProgress
	}
	return events.StartedData{}, false, nil
}

func (f *ForkTarget) stale() time.Duration {
	if f.StaleLock > 0 {
		return f.StaleLock
	}
	return 10 * time.Second
}

// readMarker returns the native ID recorded in the job's working directory.
func readMarker(wd string) (string, bool) {
	return target.ReadLine(filepath.Join(wd, events.StartMarker))
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
