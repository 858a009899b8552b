//go:build e2e

package main

import (
	"context"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/gridwire/gridwire/pkg/sshx/sshtest"
)

// `gridwire bench --slurm --ssh` against the suite's Slurm and a real sshd, at a small
// size, prints both target rows with measured numbers beside their yardsticks instead of
// reporting them skipped. (What the numbers are is the benchmarks' business.)
func TestE2EBenchTargetRows(t *testing.T) {
	if os.Getenv("SLURM_CONF") == "" {
		t.Fatal("SLURM_CONF is not set: run the end-to-end suite with .ci/e2e, which starts Slurm")
	}
	srv := sshtest.StartOpenSSH(t)
	status, out, errOut := cli(context.Background(), "bench", "--targets-only", "--allow-root-jobs", "--data", t.TempDir(),
		"--slurm", "--slurm-jobs", "8", "--slurm-pairs", "2",
		"--ssh", srv.Addr, "--ssh-user", srv.User, "--ssh-identity", srv.ClientKeyFile, "--ssh-known-hosts", srv.KnownHostsFile,
		"--ssh-work-root", srv.Dir, "--ssh-jobs", "8")
	if status != 0 {
		t.Fatalf("exit %d: %s\n%s", status, errOut, out)
	}
	rows := map[string]*regexp.Regexp{
		"slurm": regexp.MustCompile(`(?m)^Slurm e2e, 8 jobs x 2 through gridwire +([0-9.]+) jobs/s = [+-][0-9.]+% +sbatch --wrap true ([0-9.]+) jobs/s +<= \+5% \((met|NOT met)\)$`),
		"ssh":   regexp.MustCompile(`(?m)^SSH cluster, 8 fork jobs +([0-9.]+) jobs/s = [0-9.]+x OpenSSH +OpenSSH CM 1 at a time ([0-9.]+)/s +>= 3x \((met|NOT met)\)$`),
	}
	for name, re := range rows {
		m := re.FindStringSubmatch(out)
		if m == nil {
			t.Errorf("%s: no row matching %s in:\n%s", name, re, out)
			continue
		}
		for _, v := range m[1:3] {
			if f, err := strconv.ParseFloat(v, 64); err != nil || f <= 0 {
				t.Errorf("%s: rate %q is not a measured rate:\n%s", name, v, out)
			}
		}
	}
	for _, want := range []string{"pair 1: sbatch ", "pair 2: sbatch ", "gridwire: timeline submitted 8 "} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in:\n%s", want, out)
		}
	}
	if strings.Contains(out, "skipped") {
		t.Errorf("a target row is reported skipped:\n%s", out)
	}
}
