package stager

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gridwire/gridwire/events"
)

// v3 substitutes {taskid}, {queue} and {lrms} in default_storage_base, stdin, stdout,
// stderr and the keys and values of input and output files. The incarnator records the
// substituted values; the stager moves those, never the literal placeholders.
func TestStagerMovesSubstitutedNames(t *testing.T) {
	e := newEnv(t)
	e.start(testConfig())
	store := t.TempDir()
	id := events.NewID()
	writeFile(t, filepath.Join(store, "in", id+".txt"), "input of "+id)
	writeFile(t, filepath.Join(store, "in", "stdin-batch"), "stdin")
	job := events.Job{ID: id, Substitutions: []string{"taskid", "queue", "lrms"},
		DefaultStorageBase: "file://" + store + "/{lrms}",
		Stdin:              "file://" + store + "/in/stdin-{queue}",
		Stdout:             []string{"{taskid}.stdout"},
		Stderr:             []string{"err/{queue}.stderr"},
		StageIn:            []events.FileCopy{{From: "file://" + store + "/in/{taskid}.txt", To: "in-{taskid}.txt"}},
		StageOut:           []events.FileCopy{{From: "out-{queue}.txt", To: "{taskid}/a.txt"}},
	}
	vars := map[string]string{"taskid": id, "queue": "batch", "lrms": "Fork"}
	sub := job.Substitute(vars)
	// The incarnator's record: every changed value, by field.
	inc := events.IncarnatedData{Cluster: "local", Queue: "batch", LRMS: "Fork", Substituted: map[string]string{
		"default_storage_base": sub.DefaultStorageBase, "stdin": sub.Stdin,
		"stdout.0": sub.Stdout[0], "stderr.0": sub.Stderr[0],
		"stage_in.0.from": sub.StageIn[0].From, "stage_in.0.to": sub.StageIn[0].To,
		"stage_out.0.from": sub.StageOut[0].From, "stage_out.0.to": sub.StageOut[0].To,
	}}
	e.incarnateWith(job, inc)
	st := e.waitStatus(id, events.StatusQueued)
	wd := st.Incarnation.WorkDir
	if got := readFile(t, filepath.Join(wd, "in-"+id+".txt")); got != "input of "+id {
		t.Errorf("input staged as %q", got)
	}
	if got := readFile(t, filepath.Join(wd, events.StdinFile)); got != "stdin" {
		t.Errorf("stdin %q", got)
	}
	if _, err := os.Stat(filepath.Join(wd, "in-{taskid}.txt")); err == nil {
		t.Error("input staged under its literal placeholder name")
	}
	writeFile(t, filepath.Join(wd, "out-batch.txt"), "result")
	writeFile(t, filepath.Join(wd, events.StdoutFile), "out")
	writeFile(t, filepath.Join(wd, events.StderrFile), "err")
	e.exit(id, 0)
	st = e.waitStagedOut(id)
	if !st.StagedOut.OK {
		t.Fatalf("stage-out: %+v", st.StagedOut)
	}
	for p, want := range map[string]string{
		filepath.Join(store, "Fork", id, "a.txt"):           "result",
		filepath.Join(store, "Fork", id+".stdout"):          "out",
		filepath.Join(store, "Fork", "err", "batch.stderr"): "err",
	} {
		if got := readFile(t, p); got != want {
			t.Errorf("%s = %q, want %q", p, got, want)
		}
	}
	for _, tr := range st.Transfers {
		if strings.Contains(tr.From+tr.To, "{") {
			t.Errorf("transfer recorded with a placeholder: %+v", tr)
		}
	}
}
