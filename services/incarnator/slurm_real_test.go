//go:build e2e

package incarnator

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/pkg/shellquote"
)

// TestSlurmProfileOnRealSlurm runs the slurm profile's scripts against the real Slurm
// that .ci/e2e starts (SLURM_CONF names its slurm.conf). The fake-command tests of
// make test cover the same scripts without it.
func TestSlurmProfileOnRealSlurm(t *testing.T) {
	conf := os.Getenv("SLURM_CONF")
	if conf == "" {
		t.Fatal("SLURM_CONF is not set: the e2e suite starts Slurm and sets it (.ci/e2e)")
	}
	root := t.TempDir()
	os.Chmod(root, 0o755)
	cl := slurmCluster(root)
	cl.Queues = []string{"debug"}
	p := mustPlanner(t, testSet(t, nil), cl)
	run := func(inc events.IncarnatedData, name string, vars map[string]string) string {
		t.Helper()
		var pre strings.Builder
		for k, v := range vars {
			pre.WriteString(k + "=" + shellquote.Quote(v) + "\n")
		}
		cmd := exec.Command("/bin/sh", "-c", pre.String()+inc.Scripts[name].Body)
		cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "SLURM_CONF=" + conf, "HOME=" + os.Getenv("HOME")}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v: %s", name, err, out)
		}
		return string(out)
	}
	state := func(inc events.IncarnatedData, id string) string {
		return statusLines(t, inc, run(inc, events.ScriptStatus, map[string]string{events.VarNativeIDList: id}))[id]
	}
	await := func(inc events.IncarnatedData, id string, want ...string) {
		t.Helper()
		var got string
		for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
			if got = state(inc, id); got == "" && slicesContains(want, NativeEnded) || slicesContains(want, got) {
				return
			}
		}
		t.Fatalf("job %s: state %q, want %v", id, got, want)
	}

	inc, err := p.Plan(events.Job{ID: "01REALSLURM", Name: "it's $(real)", Executable: "/bin/sh", Count: 1,
		Arguments: []string{"-c", `echo "ran in $PWD with $1"; exit 4`, "sh", "a'b $(c)"}})
	if err != nil {
		t.Fatal(err)
	}
	writeJob(t, inc)
	installStatics(t, inc)
	vars := map[string]string{events.VarWorkDir: inc.WorkDir, events.VarJobID: "01REALSLURM"}
	id := nativeID(t, inc.NativeIDPattern, run(inc, events.ScriptStart, vars))
	if got := waitFile(t, filepath.Join(inc.WorkDir, events.ExitFile)); got != "4\n" {
		t.Errorf("exit status %q", got)
	}
	if out, _ := os.ReadFile(filepath.Join(inc.WorkDir, events.StdoutFile)); string(out) != "ran in "+inc.WorkDir+" with a'b $(c)\n" {
		t.Errorf("stdout %q", out)
	}
	await(inc, id, NativeEnded)

	inc, err = p.Plan(events.Job{ID: "01REALSLEEP", Executable: "sleep", Arguments: []string{"300"}})
	if err != nil {
		t.Fatal(err)
	}
	writeJob(t, inc)
	vars = map[string]string{events.VarWorkDir: inc.WorkDir, events.VarJobID: "01REALSLEEP"}
	id = nativeID(t, inc.NativeIDPattern, run(inc, events.ScriptStart, vars))
	vars[events.VarNativeID] = id
	await(inc, id, NativeRunning, NativeQueued)
	run(inc, events.ScriptAbort, vars)
	await(inc, id, NativeEnded)

	// A job that may not begin for an hour stays pending: HOLD, RESUME and ABORT in turn.
	begin := time.Now().Add(time.Hour)
	inc, err = p.Plan(events.Job{ID: "01REALHOLD", Executable: "true", StartTime: &begin})
	if err != nil {
		t.Fatal(err)
	}
	writeJob(t, inc)
	vars = map[string]string{events.VarWorkDir: inc.WorkDir, events.VarJobID: "01REALHOLD"}
	id = nativeID(t, inc.NativeIDPattern, run(inc, events.ScriptStart, vars))
	vars[events.VarNativeID] = id
	await(inc, id, NativeQueued)
	run(inc, events.ScriptHold, vars)
	await(inc, id, NativeHeld)
	run(inc, events.ScriptResume, vars)
	await(inc, id, NativeQueued)
	run(inc, events.ScriptAbort, vars)
	await(inc, id, NativeEnded)
}

func slicesContains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
