package incarnator

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/pkg/cluster"
)

// storageProfile defines a SCRATCH storage built from a user profile field and a
// JOB_PROLOGUE that names it as <STORAGE:SCRATCH>.
const storageProfile = `<?xml version="1.0"?>
<osp:Profile xmlns:osp="http://gpe.intel.com/osprs/profile" xmlns:idb="http://gpe.intel.com/idb" name="stores" extends="fork">
  <idb:Template name="SCRATCH">
    <idb:Invocation name=""><idb:Body><![CDATA[<SCRATCH_BASE>/<USER_NAME>]]></idb:Body></idb:Invocation>
    <idb:Field name="SCRATCH_BASE"><idb:Default>/scratch</idb:Default></idb:Field>
  </idb:Template>
  <osp:Storage name="SCRATCH" template="SCRATCH"/>
  <idb:Template name="JOB_PROLOGUE">
    <idb:Invocation name=""><idb:Body><![CDATA[
cd <WORKING_DIRECTORY> || exit 111
printf '%s\n' <STORAGE:SCRATCH> > from-template
]]></idb:Body></idb:Invocation>
  </idb:Template>
</osp:Profile>`

// Storages give their paths to jobs and staging: the JOB script exports each as
// GPE_STORAGE_<NAME> (a path only the target knows, such as HOME from the account's
// name, stays a shell expansion there), templates name it as <STORAGE:NAME>, and the
// incarnation records the paths known at rendering (USPACE is the working directory)
// for the stager's target paths.
func TestStoragesGiveTheirPaths(t *testing.T) {
	root := t.TempDir()
	cl := forkCluster(root)
	cl.Profile, cl.User = "stores", "alice"
	cfg := cluster.Config{Clusters: []cluster.Cluster{cl},
		Users: []cluster.UserProfile{{Principal: "alice", Fields: map[string]string{"SCRATCH_BASE": filepath.Join(root, "scratch")}}}}
	p, err := NewPlanner(cfg, testSet(t, map[string]string{"stores.xml": storageProfile}), "")
	if err != nil {
		t.Fatal(err)
	}
	job := events.Job{ID: "01STORE", Submitter: "alice", Executable: "/bin/sh",
		Arguments: []string{"-c", `printf '%s\n' "$GPE_STORAGE_SCRATCH" "$GPE_STORAGE_HOME" "$GPE_STORAGE_USPACE" > from-env`}}
	inc, err := p.Plan(job)
	if err != nil {
		t.Fatal(err)
	}
	scratch := filepath.Join(root, "scratch", "alice")
	want := map[string]string{"SCRATCH": scratch, "HOME": "/home/alice", "ROOT": root, "USPACE": inc.WorkDir}
	for name, path := range want {
		if inc.Storages[name] != path {
			t.Errorf("incarnation storage %s = %q, want %q (all: %v)", name, inc.Storages[name], path, inc.Storages)
		}
	}
	writeJob(t, inc)
	vars := map[string]string{events.VarWorkDir: inc.WorkDir, events.VarJobID: job.ID}
	if out, err := runScript(t, "/bin/sh", inc.Scripts[events.ScriptStart].Body, vars, ""); err != nil {
		t.Fatalf("START: %v: %s", err, out)
	}
	if got := waitFile(t, filepath.Join(inc.WorkDir, events.ExitFile)); got != "0\n" {
		t.Fatalf("exit %q", got)
	}
	for file, content := range map[string]string{"from-env": scratch + "\n/home/alice\n" + inc.WorkDir + "\n", "from-template": scratch + "\n"} {
		data, err := os.ReadFile(filepath.Join(inc.WorkDir, file))
		if err != nil || string(data) != content {
			t.Errorf("%s: %q (%v), want %q", file, data, err, content)
		}
	}

	// Without a configured user, HOME holds the account's name only the target knows:
	// exported as a shell expansion, not recorded for staging.
	cl.User = ""
	p = mustPlanner(t, testSet(t, map[string]string{"stores.xml": storageProfile}), cl)
	inc, err = p.Plan(events.Job{ID: "01NOUSER", Executable: "/bin/true"})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := inc.Storages["HOME"]; ok {
		t.Errorf("HOME recorded although its path depends on the target: %v", inc.Storages)
	}
}
