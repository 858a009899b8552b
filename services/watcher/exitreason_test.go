package watcher

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/gridwire/gridwire/events"
)

// TestExitReasonIsObserved: the reason a job script wrote after its exit code (a passed
// start deadline, an exceeded duration) reaches the observation, on a fork host and in a
// batched probe's output alike, so the job's end says why.
func TestExitReasonIsObserved(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, events.ControlDir), 0o700)
	os.WriteFile(filepath.Join(dir, events.ExitFile), []byte("143 jobDuration PT2S: still running after 2 s, so it was ended\n"), 0o600)
	o := probeFork(Watched{JobID: "j", WorkDir: dir, NativeID: "0"})
	if !o.Exited || o.ExitCode != 143 || o.Reason != "jobDuration PT2S: still running after 2 s, so it was ended" {
		t.Errorf("fork observation %+v", o)
	}
	out := "7 RUNNING\ngw:exits 0\ngw:exit 0 125 jobStartBefore: the job had not started by 2020-01-02T03:04:05Z\ngw:exit 1 0\n"
	_, exits, err := parseProbe([]byte(out), regexp.MustCompile(`^(?P<id>\d+) (?P<state>\w+)$`))
	if err != nil {
		t.Fatal(err)
	}
	if exits[0] != (exitLine{125, "jobStartBefore: the job had not started by 2020-01-02T03:04:05Z"}) || exits[1] != (exitLine{0, ""}) {
		t.Errorf("exits %+v", exits)
	}
}
