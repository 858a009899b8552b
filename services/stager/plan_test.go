package stager

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/gridwire/gridwire/events"
)

type planView struct {
	Dir, From, To, Local string
	Of                   int
	Tree, Exec, Refused  bool
}

func viewPlan(items []item) []planView {
	var out []planView
	for _, it := range items {
		out = append(out, planView{it.dir, it.from, it.to, it.local, it.of, it.tree, it.exec, it.err != nil})
	}
	return out
}

func TestPlan(t *testing.T) {
	job := events.Job{
		Executable: "./run.sh", MaxTransferAttempts: 4, DefaultStorageBase: "sftp://store/base/",
		Stdin: "in.txt",
		StageIn: []events.FileCopy{
			{From: "run.sh", To: "run.sh", Attempts: 9},
			{From: "data/", To: "data"},
			{From: "run.sh", To: "run.sh"}, // repeated: one entry
			{From: "http://h/x", To: "../x"},
		},
		Stdout:   []string{"out.txt", "file:///archive/out.txt"},
		Stderr:   []string{"err.txt"},
		StageOut: []events.FileCopy{{From: "ok", To: "ok", When: WhenSuccess}, {From: "core", To: "core", When: WhenFailure}, {From: "all/", To: "all/"}},
	}
	wantIn := []planView{
		{DirIn, "sftp://store/base/in.txt", events.StdinFile, events.StdinFile, 4, false, false, false},
		{DirIn, "sftp://store/base/run.sh", "run.sh", "run.sh", 9, false, true, false},
		{DirIn, "sftp://store/base/data/", "data", "data", 4, true, false, false},
		{DirIn, "http://h/x", "../x", "", 4, false, false, true}, // refused: no local name
	}
	if diff := cmp.Diff(wantIn, viewPlan(planIn(job, 3, nil))); diff != "" {
		t.Errorf("stage-in plan (-want +got):\n%s", diff)
	}
	out := func(success bool) []planView { return viewPlan(planOut(job, 3, success, nil)) }
	stdio := []planView{
		{DirOut, events.StdoutFile, "sftp://store/base/out.txt", events.StdoutFile, 4, false, false, false},
		{DirOut, events.StdoutFile, "file:///archive/out.txt", events.StdoutFile, 4, false, false, false},
		{DirOut, events.StderrFile, "sftp://store/base/err.txt", events.StderrFile, 4, false, false, false},
	}
	all := planView{DirOut, "all/", "sftp://store/base/all/", "all", 4, true, false, false}
	okEntry := planView{DirOut, "ok", "sftp://store/base/ok", "ok", 4, false, false, false}
	core := planView{DirOut, "core", "sftp://store/base/core", "core", 4, false, false, false}
	if diff := cmp.Diff(append(append([]planView{}, stdio...), okEntry, all), out(true)); diff != "" {
		t.Errorf("stage-out after success (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(append(append([]planView{}, stdio...), core, all), out(false)); diff != "" {
		t.Errorf("stage-out after failure (-want +got):\n%s", diff)
	}
	job.MaxTransferAttempts = 0
	if got := planIn(job, 3, nil)[0].of; got != 3 {
		t.Errorf("default budget: %d", got)
	}
}
