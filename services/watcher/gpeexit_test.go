package watcher

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/gridwire/gridwire/events"
)

// The GPE OS profile spec has JOB_EPILOGUE write the job's exit status to
// <WORKING_DIRECTORY>/.gpe_exit_status. A profile whose epilogue writes only that file
// gets its job's exit code, on a fork host and through a batched status probe alike;
// gridwire's own file wins when both are there.
func TestGPEExitStatusFileIsHonoured(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, events.GPEExitFile), []byte("3\n"), 0o600)
	if o := probeFork(Watched{JobID: "j", WorkDir: dir, NativeID: "0"}); !o.Exited || o.ExitCode != 3 {
		t.Errorf("fork observation %+v, want exit 3", o)
	}

	f := newProbeFixture(t)
	status := statusScript(f.dir)
	gpe := f.job(t, "G1", "201", "", -1, status)
	os.WriteFile(filepath.Join(gpe.WorkDir, events.GPEExitFile), []byte("3\n"), 0o600)
	both := f.job(t, "G2", "202", "", 5, status)
	os.WriteFile(filepath.Join(both.WorkDir, events.GPEExitFile), []byte("9\n"), 0o600)
	got, err := f.prober(0).Probe(context.Background(), []Watched{gpe, both})
	if err != nil {
		t.Fatal(err)
	}
	if o := got["G1"]; !o.Exited || o.ExitCode != 3 {
		t.Errorf("batch observation of a .gpe_exit_status job %+v, want exit 3", o)
	}
	if o := got["G2"]; !o.Exited || o.ExitCode != 5 {
		t.Errorf("batch observation with both files %+v, want gridwire's 5", o)
	}
}
