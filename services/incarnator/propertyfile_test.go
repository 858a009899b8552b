package incarnator

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/pkg/envfile"
)

// ddsTask is a task of a DDS session that declares a property, whose program prints the
// property API's variables it sees.
func ddsTask(id string) events.Job {
	return events.Job{ID: id, Parent: "01SESSION", Executable: "/bin/sh",
		Arguments: []string{"-c", `printf '%s|%s\n' "${` + events.VarPropertyURL + `-unset}" "${` + events.VarPropertyToken + `-unset}"`},
		DDS:       &events.DDSContext{Properties: []events.DDSProperty{{Name: "peer", Access: "write"}}}}
}

// The JOB script of a task with properties takes the property API's address and
// credential from the file the executor leaves beside a batch job, hands them to the
// program, and removes the file once the program has ended; where there is no file (a
// fork or SSH target), the program sees what its environment held.
func TestJobScriptLoadsThePropertyFile(t *testing.T) {
	const token = "gwt1.01TASK.c2VjcmV0"
	p := mustPlanner(t, testSet(t, nil), forkCluster(t.TempDir()))
	inc, err := p.Plan(ddsTask("01TASK"))
	if err != nil {
		t.Fatal(err)
	}
	body := inc.Scripts[events.ScriptJob].Body
	if !strings.Contains(body, envfile.PropertyFile) {
		t.Fatalf("the JOB script does not read %s:\n%s", envfile.PropertyFile, body)
	}
	writeJob(t, inc)
	file := filepath.Join(inc.WorkDir, envfile.PropertyFile)
	content, err := envfile.Encode([]envfile.Var{{Name: events.VarPropertyURL, Value: "http://head:8080"}, {Name: events.VarPropertyToken, Value: token}})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := runScript(t, "/bin/sh", inc.Scripts[events.ScriptStart].Body, map[string]string{events.VarWorkDir: inc.WorkDir, events.VarJobID: "01TASK"}, ""); err != nil {
		t.Fatalf("START: %v: %s", err, out)
	}
	if got := waitFile(t, filepath.Join(inc.WorkDir, events.ExitFile)); got != "0\n" {
		t.Fatalf("exit status %q", got)
	}
	out, _ := os.ReadFile(filepath.Join(inc.WorkDir, events.StdoutFile))
	if want := "http://head:8080|" + token + "\n"; string(out) != want {
		t.Fatalf("the program saw %q, want %q", out, want)
	}
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Fatalf("the property file is still there after the program ended: %v", err)
	}

	// Without the file, the environment's values stand.
	inc2, err := p.Plan(ddsTask("01TASK2"))
	if err != nil {
		t.Fatal(err)
	}
	writeJob(t, inc2)
	if out, err := runScript(t, "/bin/sh", events.VarPropertyToken+"=from-env; export "+events.VarPropertyToken+"\n"+inc2.Scripts[events.ScriptStart].Body,
		map[string]string{events.VarWorkDir: inc2.WorkDir, events.VarJobID: "01TASK2"}, ""); err != nil {
		t.Fatalf("START: %v: %s", err, out)
	}
	waitFile(t, filepath.Join(inc2.WorkDir, events.ExitFile))
	if out, _ := os.ReadFile(filepath.Join(inc2.WorkDir, events.StdoutFile)); string(out) != "unset|from-env\n" {
		t.Fatalf("without the file the program saw %q", out)
	}

	// A job without properties has no part in it.
	plain := ddsTask("01PLAIN")
	plain.DDS.Properties = nil
	inc3, err := p.Plan(plain)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(inc3.Scripts[events.ScriptJob].Body, envfile.PropertyFile) {
		t.Fatalf("a task without properties reads the property file:\n%s", inc3.Scripts[events.ScriptJob].Body)
	}
}
