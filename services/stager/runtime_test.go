package stager

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/pkg/sshx/sshtest"
)

// runtimeJob stages src in as {JOBID}.in, copies its stdout to {LOGNAME}.out in its
// directory and cleans up {HOME}/scratch-{JOBID}: names only the target can fill.
func runtimeJob(src string) events.Job {
	return events.Job{ID: events.NewID(), Substitutions: []string{"HOME", "JOBID", "LOGNAME"},
		StageIn: []events.FileCopy{{From: src, To: "{JOBID}.in"}},
		Stdout:  []string{"{LOGNAME}.out"},
		Cleanup: []string{"{HOME}/scratch-{JOBID}"}}
}

// checkRuntimeNames plays the job's part and checks every name arrived filled.
func checkRuntimeNames(t *testing.T, e *env, id, wd, home string) {
	t.Helper()
	e.waitStatus(id, events.StatusQueued)
	if got := readFile(t, filepath.Join(wd, id+".in")); got != "input" {
		t.Errorf("stage-in to {JOBID}.in: %q", got)
	}
	scratch := filepath.Join(home, "scratch-"+id)
	writeFile(t, scratch, "x")
	writeFile(t, filepath.Join(wd, events.StdoutFile), "printed")
	e.exit(id, 0)
	st := e.waitStagedOut(id)
	if !st.StagedOut.OK {
		t.Fatalf("staged_out %+v", st.StagedOut)
	}
	if got := readFile(t, filepath.Join(wd, "gwtester.out")); got != "printed" {
		t.Errorf("stdout to {LOGNAME}.out: %q", got)
	}
	if _, err := os.Stat(scratch); !os.IsNotExist(err) {
		t.Errorf("cleanup of {HOME}/scratch-{JOBID}: %v", err)
	}
	entries, _ := os.ReadDir(wd)
	for _, en := range entries {
		if strings.Contains(en.Name(), "{") {
			t.Errorf("a placeholder reached the target: %s", en.Name())
		}
	}
}

// Reserved names in staging names, stdout destinations and cleanup are filled with the
// target's values (the job's ID, the account's LOGNAME and HOME) on a fork cluster. On
// the old main the stager moved {JOBID}.in and {LOGNAME}.out literally.
func TestRuntimeNamesInStagingOnFork(t *testing.T) {
	home := t.TempDir() // inside the test config's read-write root: cleanup there is allowed
	t.Setenv("HOME", home)
	t.Setenv("LOGNAME", "gwtester")
	e := newEnv(t)
	e.start(testConfig())
	files := t.TempDir()
	writeFile(t, filepath.Join(files, "in"), "input")
	job := runtimeJob(filepath.Join(files, "in"))
	wd := filepath.Join(home, "wd")
	job.Cleanup[0] = "{HOME}/wd/scratch-{JOBID}" // the fork job's home is inside its root
	id := e.incarnate(job, "local", wd)
	checkRuntimeNames(t, e, id, wd, wd)
}

// On an SSH cluster the values are read over SSH from the host the job runs on.
func TestRuntimeNamesInStagingOverSSH(t *testing.T) {
	srv := sshtest.NewServer(t)
	t.Setenv("HOME", srv.Home) // the test server runs commands in this process's environment
	t.Setenv("LOGNAME", "gwtester")
	e := newEnv(t)
	e.start(sftpConfig(srv))
	files := t.TempDir()
	writeFile(t, filepath.Join(files, "in"), "input")
	job := runtimeJob(filepath.Join(files, "in"))
	job.Cleanup[0] = "{HOME}/jobs/j1/scratch-{JOBID}" // inside its working directory on the host
	wd := filepath.Join(srv.Home, "jobs", "j1")
	id := e.incarnate(job, "remote", wd)
	checkRuntimeNames(t, e, id, wd, wd)
	if srv.Execs() == 0 {
		t.Error("the values were not read on the host")
	}
}

// Only names used where the stager reads are asked of the target: a job whose reserved
// names are in its program's words alone costs no command on the host.
func TestRuntimeNamesOnlyWhereTheStagerReads(t *testing.T) {
	job := events.Job{Substitutions: []string{"HOME", "JOBID", "LOGNAME"}, Arguments: []string{"{HOME}"},
		Stdout: []string{"{JOBID}.out"}, StageIn: []events.FileCopy{{From: "/x", To: "{LOGNAME}"}}}
	if got := runtimeNames(job); strings.Join(got, ",") != "JOBID,LOGNAME" {
		t.Errorf("names %v; want JOBID and LOGNAME (HOME is only in the arguments)", got)
	}
	if got := runtimeNames(events.Job{Substitutions: []string{"HOME"}, Arguments: []string{"{HOME}"}}); len(got) != 0 {
		t.Errorf("names %v; want none", got)
	}
}
