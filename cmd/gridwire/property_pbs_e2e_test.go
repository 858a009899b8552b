//go:build e2e

package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/pkg/envfile"
)

// On PBS (the shipped pbs profile through Slurm's Torque wrappers): a writer task sets a
// property with `gridwire property put` and a reader task of the same session waits for
// it with `gridwire property watch --once`. Real PBS's qsub hands the job none of the
// submitting environment unless told to (-V, -v, which would put the credential in the
// job's attributes); the wrapper's sbatch would hand it all, so the test sets
// SBATCH_EXPORT=NONE, under which it hands none, as qsub does. The tasks reach the API
// through the private file the executor leaves beside each job, which their JOB script
// reads on the node and removes when the program ends; no credential is in the log.
func TestE2EPropertiesOnPBS(t *testing.T) {
	cl := pbsCluster(t)
	if err := os.Chmod(cl.WorkRoot, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SBATCH_EXPORT", "NONE")
	cfg := writeFile(t, t.TempDir(), "gridwire.yaml", "clusters:\n  - name: pbs\n    kind: fork\n    profile: pbs\n    lrms: PBS\n"+
		"    queues: [debug]\n    work_root: "+cl.WorkRoot+"\n")
	shared := sharedDir(t)
	bin := filepath.Join(shared, "gridwire")
	if err := os.Rename(buildBinary(t), bin); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	server := serveCLI(t, "--config", cfg)
	topo := writeFile(t, t.TempDir(), "props.xml", `<topology name="pbs-props">
  <property name="peer"/>
  <decltask name="server">
    <exe>/bin/sh -c 'env > `+shared+`/writer.env; `+bin+` property put peer from-pbs'</exe>
    <properties><name access="write">peer</name></properties>
  </decltask>
  <decltask name="client">
    <exe>/bin/sh -c '`+bin+` property watch --once peer > `+shared+`/got.tmp &amp;&amp; mv `+shared+`/got.tmp `+shared+`/got'</exe>
    <properties><name access="read">peer</name></properties>
  </decltask>
  <main name="main"><task>server</task><task>client</task></main>
</topology>`)
	ctx := context.Background()
	out, errOut, err := runCLI(ctx, "submit", "--server", server, topo)
	if err != nil {
		t.Fatalf("submit: %v %s", err, errOut)
	}
	ids := strings.Fields(out)
	if len(ids) != 3 {
		t.Fatalf("submit printed %q, want the session and two tasks", out)
	}
	if got := waitContent(t, filepath.Join(shared, "got")); got != "from-pbs" {
		env, _ := os.ReadFile(filepath.Join(shared, "writer.env"))
		t.Fatalf("the reader got %q; the writer's environment:\n%s", got, env)
	}
	// The job had none of the submitting environment: what it has, it has from the file.
	if env := waitContent(t, filepath.Join(shared, "writer.env")); strings.Contains(env, "SBATCH_EXPORT=") {
		t.Fatalf("the writer had the submitting environment, so this shows nothing about PBS:\n%s", env)
	}
	session := ids[0]
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		out, _, _ := runCLI(ctx, "status", "--json", "--server", server, session)
		var v jobView
		if json.Unmarshal([]byte(out), &v) == nil && v.Status == string(events.StatusSucceeded) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the session did not succeed: %s", out)
		}
	}
	for _, id := range ids[1:] {
		dir := filepath.Join(cl.WorkRoot, id)
		if _, err := os.Stat(filepath.Join(dir, events.ScriptFile)); err != nil {
			t.Fatalf("task %s's working directory: %v", id, err)
		}
		if _, err := os.Stat(filepath.Join(dir, envfile.PropertyFile)); !os.IsNotExist(err) {
			t.Errorf("task %s's property file is still there after it ended: %v", id, err)
		}
		h, _, _ := runCLI(ctx, "history", "--json", "--server", server, id)
		if !strings.Contains(h, envfile.PropertyFile) {
			t.Errorf("task %s's recorded JOB script does not read the property file:\n%s", id, h)
		}
		if strings.Contains(h, "gwt1.") {
			t.Errorf("a task credential is in the history of %s", id)
		}
	}
}
