package stager

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gridwire/gridwire/events"
)

// v3 allows absolute paths on the compute node as input and output keys. The stager
// stages them inside the target paths the operator opened (here read-write to every
// job), and refuses by name, permanently, a path outside them or one opened only for
// reading when it would be written.
func TestAbsoluteNodePathsWithinTargetPaths(t *testing.T) {
	scratch, readOnly, forbidden, store := t.TempDir(), t.TempDir(), t.TempDir(), t.TempDir()
	cfg := testConfig()
	cfg.TargetPaths = []FileRoot{{Path: scratch, Access: AccessReadWrite}, {Path: readOnly}}
	e := newEnv(t)
	e.start(cfg)
	writeFile(t, filepath.Join(store, "in.txt"), "input")
	writeFile(t, filepath.Join(store, "tree", "a", "b.txt"), "tree file")

	id := e.incarnate(events.Job{Executable: scratch + "/run/in.txt",
		StageIn: []events.FileCopy{
			{From: "file://" + store + "/in.txt", To: scratch + "/run/in.txt"},
			{From: "file://" + store + "/tree/", To: scratch + "/tree"},
		},
		StageOut: []events.FileCopy{{From: scratch + "/run/out.txt", To: "file://" + store + "/out.txt"}},
	}, "local", "")
	e.waitStatus(id, events.StatusQueued)
	if got := readFile(t, filepath.Join(scratch, "run", "in.txt")); got != "input" {
		t.Errorf("absolute input staged as %q", got)
	}
	if fi, err := os.Stat(filepath.Join(scratch, "run", "in.txt")); err != nil || fi.Mode().Perm()&0o100 == 0 {
		t.Errorf("the job's program staged to an absolute path is not executable: %v %v", fi.Mode(), err)
	}
	if fi, err := os.Stat(filepath.Join(scratch, "tree", "a", "b.txt")); err != nil || fi.Mode().Perm()&0o100 != 0 {
		t.Errorf("a file that is not the program was made executable: %v", err)
	}
	if got := readFile(t, filepath.Join(scratch, "tree", "a", "b.txt")); got != "tree file" {
		t.Errorf("absolute directory staged as %q", got)
	}
	writeFile(t, filepath.Join(scratch, "run", "out.txt"), "result")
	e.exit(id, 0)
	if st := e.waitStagedOut(id); !st.StagedOut.OK {
		t.Fatalf("stage-out: %+v", st.StagedOut)
	}
	if got := readFile(t, filepath.Join(store, "out.txt")); got != "result" {
		t.Errorf("absolute output staged out as %q", got)
	}

	for _, to := range []string{forbidden + "/x.txt", readOnly + "/x.txt", scratch + "/../x.txt"} {
		id := e.incarnate(events.Job{MaxTransferAttempts: 3,
			StageIn: []events.FileCopy{{From: "file://" + store + "/in.txt", To: to}}}, "local", "")
		st := e.waitStatus(id, events.StatusFailed)
		if len(st.Transfers) != 1 || !st.Transfers[0].Permanent {
			t.Errorf("%s: want one permanent refusal, got %+v", to, st.Transfers)
		}
		if !strings.Contains(st.Reason, "stager.target_paths") || !strings.Contains(st.Reason, to) {
			t.Errorf("%s: the reason names neither the path nor the setting: %q", to, st.Reason)
		}
	}
	for _, dir := range []string{forbidden, readOnly} {
		if entries, _ := os.ReadDir(dir); len(entries) != 0 {
			t.Errorf("a refused path was written in %s: %v", dir, entries)
		}
	}
}

// Ingest accepts absolute node paths as keys (the spec allows them); the policy is the
// stager's, where the target is known.
func TestCheckURLsAcceptsAbsoluteNodePaths(t *testing.T) {
	job := events.Job{
		StageIn:  []events.FileCopy{{From: "https://example.org/a", To: "/scratch/a"}},
		StageOut: []events.FileCopy{{From: "/scratch/b", To: "https://example.org/b"}},
	}
	if err := CheckURLs(job); err != nil {
		t.Errorf("absolute node paths refused at submission: %v", err)
	}
	job.StageIn[0].To = "/scratch/../etc/passwd"
	if err := CheckURLs(job); err == nil || !strings.Contains(err.Error(), "stage_in[0].to") {
		t.Errorf("'..' in an absolute node path: got %v", err)
	}
}

// A target path may name a storage of the job's OS profile instead of a path: it opens
// the storage's path the incarnation recorded for that job, and nothing for a job
// whose profile has no such storage.
func TestTargetPathNamesAProfileStorage(t *testing.T) {
	scratch, store := t.TempDir(), t.TempDir()
	cfg := testConfig()
	cfg.TargetPaths = []FileRoot{{Storage: "SCRATCH", Access: AccessReadWrite}}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t)
	e.start(cfg)
	writeFile(t, filepath.Join(store, "in.txt"), "input")
	job := events.Job{MaxTransferAttempts: 1, StageIn: []events.FileCopy{{From: "file://" + store + "/in.txt", To: scratch + "/in.txt"}}}
	id := e.incarnateWith(job, events.IncarnatedData{Cluster: "local", Storages: map[string]string{"SCRATCH": scratch}})
	e.waitStatus(id, events.StatusQueued)
	if got := readFile(t, filepath.Join(scratch, "in.txt")); got != "input" {
		t.Errorf("staged into the storage as %q", got)
	}
	id = e.incarnateWith(job, events.IncarnatedData{Cluster: "local", Storages: map[string]string{"HOME": scratch}})
	st := e.waitStatus(id, events.StatusFailed)
	if !strings.Contains(st.Reason, "stager.target_paths") {
		t.Errorf("a job without the storage: %q", st.Reason)
	}
	c := testConfig()
	c.TargetPaths = []FileRoot{{Storage: "X", Path: "/x"}}
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "path and storage exclude each other") {
		t.Errorf("a target path with both: %v", err)
	}
	c = testConfig()
	c.FileRoots = append(c.FileRoots, FileRoot{Storage: "HOME"})
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "only a target path may name a storage") {
		t.Errorf("a file root naming a storage: %v", err)
	}
}
