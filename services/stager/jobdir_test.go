package stager

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/pkg/sshx/sshtest"
)

// dirJob is a job running in dir that stages in.txt from src, writes back out.txt to
// dst, copies its stdout to the relative STDOUT (a file in its directory) and cleans up
// in.txt and the absolute scratch.
func dirJob(dir, src, dst, scratch string) events.Job {
	return events.Job{Directory: dir,
		StageIn:  []events.FileCopy{{From: src, To: "in.txt"}},
		StageOut: []events.FileCopy{{From: "out.txt", To: dst}},
		Stdout:   []string{"STDOUT"},
		Cleanup:  []string{"in.txt", scratch}}
}

// checkJobDir plays the job's part in jobDir (it wrote out.txt, scratch and its stdout)
// and checks that stage-in, stage-out and cleanup all used jobDir.
func checkJobDir(t *testing.T, e *env, id, jobDir, dst, scratch string) {
	t.Helper()
	st := e.waitStatus(id, events.StatusQueued)
	if got := readFile(t, filepath.Join(jobDir, "in.txt")); got != "input" {
		t.Errorf("stage-in in the job's directory: %q", got)
	}
	if jobDir != st.Incarnation.WorkDir {
		if _, err := os.Stat(filepath.Join(st.Incarnation.WorkDir, "in.txt")); err == nil {
			t.Error("stage-in also landed in the working directory")
		}
	}
	writeFile(t, filepath.Join(jobDir, "out.txt"), "result")
	writeFile(t, scratch, "scratch")
	writeFile(t, filepath.Join(st.Incarnation.WorkDir, events.StdoutFile), "printed")
	e.exit(id, 0)
	st = e.waitStagedOut(id)
	if !st.StagedOut.OK {
		t.Fatalf("a job that exited 0: staged_out %+v", st.StagedOut)
	}
	if got := readFile(t, dst); got != "result" {
		t.Errorf("stage-out from the job's directory: %q", got)
	}
	if got := readFile(t, filepath.Join(jobDir, "STDOUT")); got != "printed" {
		t.Errorf("relative STDOUT in the job's directory: %q", got)
	}
	for _, gone := range []string{filepath.Join(jobDir, "in.txt"), scratch} {
		if _, err := os.Stat(gone); !os.IsNotExist(err) {
			t.Errorf("cleanup left %s (%v)", gone, err)
		}
	}
	if _, err := os.Stat(filepath.Join(jobDir, "out.txt")); err != nil {
		t.Errorf("cleanup removed what it was not asked to: %v", err)
	}
}

// A job's <directory>, relative or absolute, is where its files are staged in, staged
// out from and cleaned up, on a fork cluster. On the old main stage-in landed in the
// working directory, stage-out failed a job that exited 0 and cleanup missed.
func TestJobDirectoryStagingAndCleanupAgree(t *testing.T) {
	e := newEnv(t)
	cfg := testConfig()
	cfg.TargetPaths = cfg.FileRoots // the temporary directory, read-write
	e.start(cfg)
	files := t.TempDir()
	writeFile(t, filepath.Join(files, "in"), "input")
	t.Run("relative", func(t *testing.T) {
		wd := filepath.Join(t.TempDir(), "wd")
		scratch := filepath.Join(wd, "run", "scratch")
		id := e.incarnate(dirJob("run", filepath.Join(files, "in"), filepath.Join(files, "rel-out"), scratch), "local", wd)
		checkJobDir(t, e, id, filepath.Join(wd, "run"), filepath.Join(files, "rel-out"), scratch)
	})
	t.Run("absolute, inside a target path", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "elsewhere")
		scratch := filepath.Join(t.TempDir(), "scratch") // absolute, in the read-write target path
		id := e.incarnate(dirJob(dir, filepath.Join(files, "in"), filepath.Join(files, "abs-out"), scratch), "local", "")
		checkJobDir(t, e, id, dir, filepath.Join(files, "abs-out"), scratch)
	})
}

// The job's directory outside its working directory is an absolute path on the target:
// staging into it needs a target path, and the refusal names the policy. A job that
// stages nothing there still runs in it.
func TestJobDirectoryOutsideTheTargetPathsIsRefused(t *testing.T) {
	e := newEnv(t)
	cfg := testConfig()
	cfg.TargetPaths = []FileRoot{{Path: filepath.Join(t.TempDir(), "only"), Access: AccessReadWrite}}
	e.start(cfg)
	dir := t.TempDir()
	id := e.incarnate(events.Job{Directory: dir, StageIn: []events.FileCopy{{From: "https://127.0.0.1:1/x", To: "x"}}}, "local", "")
	st := e.waitStatus(id, events.StatusFailed)
	if !strings.Contains(st.Reason, "stager.target_paths") || !strings.Contains(st.Reason, dir) {
		t.Errorf("reason %q; want the directory and the policy named", st.Reason)
	}
	id = e.incarnate(events.Job{Directory: dir}, "local", "")
	e.waitStatus(id, events.StatusQueued)
}

// Absolute cleanup paths: inside the job's directory always; elsewhere only inside a
// target path open for writing, else a refusal naming stager.target_paths.
func TestAbsoluteCleanupFollowsThePolicy(t *testing.T) {
	e := newEnv(t)
	cfg := testConfig()
	open := filepath.Join(t.TempDir(), "open")
	cfg.TargetPaths = []FileRoot{{Path: open, Access: AccessReadWrite}}
	e.start(cfg)
	closed := filepath.Join(t.TempDir(), "closed")
	writeFile(t, filepath.Join(open, "a"), "a")
	writeFile(t, closed, "c")
	id := e.incarnate(events.Job{Cleanup: []string{filepath.Join(open, "a"), closed}}, "local", "")
	e.waitStatus(id, events.StatusQueued)
	e.exit(id, 0)
	st := e.waitStagedOut(id)
	if _, err := os.Stat(filepath.Join(open, "a")); !os.IsNotExist(err) {
		t.Errorf("cleanup inside a writable root: %v", err)
	}
	if readFile(t, closed) != "c" {
		t.Error("cleanup removed a file outside every target path")
	}
	if st.StagedOut.OK || !strings.Contains(st.StagedOut.Reason, closed) || !strings.Contains(st.StagedOut.Reason, "stager.target_paths") {
		t.Errorf("staged_out %+v; want the refused path and the policy named", st.StagedOut)
	}
}

// On an SSH cluster the job's directory is on the host, reached over real SFTP inside a
// target path; an absolute cleanup path outside the job's directories and the target
// paths is refused there, naming why.
func TestJobDirectoryOnAnSSHCluster(t *testing.T) {
	srv := sshtest.NewServer(t)
	e := newEnv(t)
	cfg := sftpConfig(srv)
	files := t.TempDir()
	cfg.FileRoots = []FileRoot{{Path: files, Access: AccessReadWrite}}
	dir := filepath.Join(srv.Home, "project")
	cfg.TargetPaths = []FileRoot{{Path: dir, Access: AccessReadWrite}}
	e.start(cfg)
	writeFile(t, filepath.Join(files, "in"), "input")
	wd := filepath.Join(srv.Home, "jobs", "j1")
	scratch := filepath.Join(dir, "scratch")
	id := e.incarnate(dirJob(dir, filepath.Join(files, "in"), filepath.Join(files, "out"), scratch), "remote", wd)
	checkJobDir(t, e, id, dir, filepath.Join(files, "out"), scratch)

	outside := filepath.Join(srv.Home, "keep")
	writeFile(t, outside, "k")
	id = e.incarnate(events.Job{Cleanup: []string{outside}}, "remote", filepath.Join(srv.Home, "jobs", "j2"))
	e.waitStatus(id, events.StatusQueued)
	e.exit(id, 0)
	st := e.waitStagedOut(id)
	if readFile(t, outside) != "k" || st.StagedOut.OK || !strings.Contains(st.StagedOut.Reason, "stager.target_paths") {
		t.Errorf("cleanup outside the job on an SSH host: staged_out %+v", st.StagedOut)
	}
}

func TestCheckURLsJobDirectoryNames(t *testing.T) {
	ok := events.Job{Stdout: []string{"STDOUT"}, Stderr: []string{"logs/STDERR"}, Cleanup: []string{"/scratch/run1", "tmp"}}
	if err := CheckURLs(ok); err != nil {
		t.Errorf("the spec's relative STDOUT/STDERR and an absolute cleanup path: %v", err)
	}
	bad := events.Job{Stdout: []string{"../STDOUT"}, Stderr: []string{".gridwire/exit"}, Cleanup: []string{"/scratch/../etc"}}
	err := CheckURLs(bad)
	for _, w := range []string{"stdout[0]", "stderr[0]", "cleanup[0]"} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("error %v does not name %s", err, w)
		}
	}
	if !errors.Is(err, ErrLocalName) {
		t.Errorf("not ErrLocalName: %v", err)
	}
}
