package incarnator

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/gridwire/gridwire/events"
)

// gpeEpilogueProfile's JOB_EPILOGUE is written as the GPE OS profile spec has it: the
// exit status of the job goes to <WORKING_DIRECTORY>/.gpe_exit_status, taken from $?.
const gpeEpilogueProfile = `<?xml version="1.0"?>
<osp:Profile xmlns:osp="http://gpe.intel.com/osprs/profile" xmlns:idb="http://gpe.intel.com/idb" name="gpe" extends="fork">
  <idb:Template name="JOB_EPILOGUE">
    <idb:Invocation name=""><idb:Body><![CDATA[echo $? > <WORKING_DIRECTORY>/.gpe_exit_status]]></idb:Body></idb:Invocation>
  </idb:Template>
</osp:Profile>`

// A job run under an epilogue that writes .gpe_exit_status from $? leaves the program's
// exit code there (the watcher reads that file when gridwire's own is absent).
func TestGPEEpilogueWritesTheProgramsExitStatus(t *testing.T) {
	root := t.TempDir()
	cl := forkCluster(root)
	cl.Profile = "gpe"
	p := mustPlanner(t, testSet(t, map[string]string{"gpe.xml": gpeEpilogueProfile}), cl)
	job := events.Job{ID: "01GPE", Executable: "/bin/sh", Arguments: []string{"-c", "exit 3"}}
	inc, err := p.Plan(job)
	if err != nil {
		t.Fatal(err)
	}
	writeJob(t, inc)
	vars := map[string]string{events.VarWorkDir: inc.WorkDir, events.VarJobID: job.ID}
	if out, err := runScript(t, "/bin/sh", inc.Scripts[events.ScriptStart].Body, vars, ""); err != nil {
		t.Fatalf("START: %v: %s", err, out)
	}
	if got := waitFile(t, filepath.Join(inc.WorkDir, events.GPEExitFile)); got != "3\n" {
		t.Errorf(".gpe_exit_status %q, want 3", got)
	}
	if _, err := os.Stat(filepath.Join(inc.WorkDir, events.ExitFile)); err == nil {
		t.Error("the profile's epilogue replaced the shipped one, yet gridwire's exit file was written")
	}
}
