//go:build e2e

package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

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
	t.Setenv("SBATCH_EXPORT", "NONE")
	server, ids, shared := batchPropertySession(t, "PBS", cl.WorkRoot, "from-pbs", func(bin, shared string) string {
		return "/bin/sh -c 'env > " + shared + "/writer.env; " + bin + " property put peer from-pbs'"
	})
	ctx := context.Background()
	// The job had none of the submitting environment: what it has, it has from the file.
	if env := waitContent(t, filepath.Join(shared, "writer.env")); strings.Contains(env, "SBATCH_EXPORT=") {
		t.Fatalf("the writer had the submitting environment, so this shows nothing about PBS:\n%s", env)
	}
	session := ids[0]
	waitSessionSucceeded(ctx, t, server, session)
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
