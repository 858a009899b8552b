package incarnator

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/pkg/cluster"
)

// FuzzJobScript renders a job with fuzzed values in an argument, an environment value,
// a template field (in every shell context, see hostileProfile) and the directory, runs
// the JOB script, and checks that each value arrived byte for byte and nothing ran.
func FuzzJobScript(f *testing.F) {
	for _, v := range hostile {
		f.Add(v, v, v)
	}
	bin := fakeBin(f, map[string]string{"printargs": printargs})
	set := testSet(f, map[string]string{"hostile.xml": hostileProfile(1)})
	f.Fuzz(func(t *testing.T, arg, env, field string) {
		if strings.ContainsRune(arg+env+field, 0) {
			return // refused by Plan: no shell word holds a NUL
		}
		root := t.TempDir()
		cl := cluster.Cluster{Name: "local", Kind: cluster.KindFork, Profile: "hostile", LRMS: "Fork", WorkRoot: root}
		job := events.Job{ID: "01FUZZ", Executable: filepath.Join(bin, "printargs"), Arguments: []string{arg},
			Environment: []events.EnvVar{{Name: "V", Value: env}, {Name: "CWDFILE", Value: filepath.Join(root, "cwd")}},
			Fields:      map[string]string{"F0": field}, Application: &events.Application{Name: "show"}}
		inc, err := mustPlanner(t, set, cl).Plan(job)
		if err != nil {
			t.Fatal(err)
		}
		writeJob(t, inc)
		cmd := exec.Command("/bin/sh", events.ScriptFile)
		cmd.Dir = inc.WorkDir
		cmd.Env = []string{"PATH=/usr/bin:/bin"}
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("job script failed: %v %s\n%s", err, out, inc.Scripts[events.ScriptJob].Body)
		}
		noneRan(t, "fuzz", root)
		stdout, _ := os.ReadFile(filepath.Join(inc.WorkDir, events.StdoutFile))
		want := []string{arg, field, "x" + field + "y", "x" + field + "y", "x=" + field, strings.TrimRight(field, "\n"), strings.ReplaceAll(field, "a", "b")}
		if got := splitNUL(stdout); !slices.Equal(got, want) {
			t.Errorf("argv %q, want %q", got, want)
		}
		stderr, _ := os.ReadFile(filepath.Join(inc.WorkDir, events.StderrFile))
		if !slices.Contains(splitNUL(stderr), "V="+env) {
			t.Errorf("environment lacks V=%q", env)
		}
	})
}
