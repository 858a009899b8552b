package incarnator

import (
	"flag"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/pkg/cluster"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// TestGoldenRenders keeps what each shipped profile renders for one job in
// testdata/golden/<profile>.txt (go test -run Golden -update rewrites them), so every
// change to a script shows in review.
func TestGoldenRenders(t *testing.T) {
	set := testSet(t, nil)
	job := events.Job{ID: "01GOLDEN", Name: "golden run", Executable: "/opt/app/bin/solve", Arguments: []string{"--in", "data set.txt", "$(no)"},
		Environment: []events.EnvVar{{Name: "OMP_NUM_THREADS", Value: "8"}}, LibraryPath: []string{"/opt/app/lib"},
		Stdin: "in.txt", Count: 4, Duration: 2 * time.Hour, Requirements: events.Requirements{Queue: "long"}}
	clusters := map[string]cluster.Cluster{
		"fork":  {Name: "local", Kind: cluster.KindFork, Profile: "fork", LRMS: "Fork", WorkRoot: "/var/lib/gridwire/jobs"},
		"slurm": {Name: "hpc", Kind: cluster.KindSSH, Hosts: []string{"login1"}, Profile: "slurm", LRMS: "Slurm", Queues: []string{"short", "long"}, WorkRoot: "/scratch/gridwire"},
		"pbs":   {Name: "pbs", Kind: cluster.KindSSH, Hosts: []string{"head"}, Profile: "pbs", LRMS: "PBS", Queues: []string{"long"}, WorkRoot: "/home/grid/jobs"},
	}
	for name, cl := range clusters {
		j := job
		if name == "fork" {
			j.Requirements = events.Requirements{}
		}
		inc, err := mustPlanner(t, set, cl).Plan(j)
		if err != nil {
			t.Fatal(err)
		}
		got := goldenText(inc)
		path := filepath.Join("testdata", "golden", name+".txt")
		if *update {
			os.MkdirAll(filepath.Dir(path), 0o755)
			if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run go test -run Golden -update)", err)
		}
		if got != string(want) {
			t.Errorf("%s renders differently from %s (if intended, run go test -run Golden -update):\n%s", name, path, got)
		}
	}
}

func goldenText(inc events.IncarnatedData) string {
	var b strings.Builder
	b.WriteString("cluster " + inc.Cluster + ", queue " + inc.Queue + ", lrms " + inc.LRMS + ", profile " + inc.Profile + "\n")
	b.WriteString("work dir " + inc.WorkDir + "\nnative id pattern " + inc.NativeIDPattern + "\nstatus pattern " + inc.StatusPattern + "\nabsent " + inc.AbsentState + "\n")
	var names []string
	for n := range inc.NativeStates {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		b.WriteString("state " + n + " -> " + inc.NativeStates[n] + "\n")
	}
	names = names[:0]
	for n := range inc.Scripts {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		b.WriteString("\n=== " + n + "\n" + inc.Scripts[n].Body + "\n")
	}
	names = names[:0]
	for n := range inc.StaticScripts {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		s := inc.StaticScripts[n]
		b.WriteString("\n=== static " + n + " at " + s.Location + "\n" + s.Body)
	}
	return b.String()
}
