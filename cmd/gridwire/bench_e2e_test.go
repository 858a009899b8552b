//go:build e2e

package main

import (
	"context"
	"os"
	"strconv"
	"testing"

	"github.com/gridwire/gridwire/pkg/sshx/sshtest"
)

// Benchmarks of whole runs against real targets, each compared with the target's own
// tool in the same run: the target rows of `gridwire bench` (bench_targets.go), run
// against the end-to-end suite's sshd and Slurm. Run with -benchtime 1x (see
// services/executor/BENCHMARKS.md).

// BenchmarkE2ESSHCluster: 300 /bin/true jobs end to end on an ssh cluster (a real sshd
// on loopback, the fork profile) against OpenSSH running `true` over a ControlMaster
// connection, one command at a time and 8 at a time: `gridwire bench --ssh`.
func BenchmarkE2ESSHCluster(b *testing.B) {
	srv := sshtest.StartOpenSSH(b)
	o := targetBenchOpts(b)
	o.targets = targetOpts{ssh: srv.Addr, sshUser: srv.User, sshIdentity: srv.ClientKeyFile, sshKnownHosts: srv.KnownHostsFile,
		sshWorkRoot: srv.Dir, sshJobs: 300}
	if o.workRoot != "" {
		srv.Own(b, o.workRoot)
		o.targets.sshWorkRoot = o.workRoot
	}
	for i := 0; i < b.N; i++ {
		row, err := benchSSH(context.Background(), quietEnv(), o)
		if err != nil {
			b.Fatal(err)
		}
		b.Logf("CPU per job, whole machine: OpenSSH 8 at once %.1f ms, gridwire %.1f ms; of which this process and its children: %.1f ms, %.1f ms",
			row.OpenSSH8CPU.Machine, row.GridwireCPU.Machine, row.OpenSSH8CPU.Process, row.GridwireCPU.Process)
		for _, n := range row.Notes {
			b.Log(n)
		}
		b.ReportMetric(row.OpenSSHPerSec, "openssh-cm-cmds/s")
		b.ReportMetric(row.OpenSSH8PerSec, "openssh-cm-8-cmds/s")
		b.ReportMetric(row.GridwirePerSec, "gridwire-jobs/s")
		b.ReportMetric(row.Ratio, "ratio")
		b.ReportMetric(row.GridwirePerSec/row.OpenSSH8PerSec, "ratio-vs-8")
	}
}

// BenchmarkE2ESlurm: 1,000 /bin/true jobs end to end through gridwire and the slurm
// profile against `sbatch --wrap true` directly, both timed from the first submission
// until every job has left Slurm (gridwire: reached its terminal state): `gridwire bench
// --slurm`. Each iteration runs $GRIDWIRE_BENCH_PAIRS (default 1) pairs in alternating
// order; the metrics are over all pairs, and each pair is logged.
func BenchmarkE2ESlurm(b *testing.B) {
	if os.Getenv("SLURM_CONF") == "" {
		b.Fatal("SLURM_CONF is not set: start Slurm with scripts/start-slurm.sh")
	}
	o := targetBenchOpts(b)
	o.targets = targetOpts{slurm: true, slurmJobs: 1000, slurmPairs: 1}
	if v := os.Getenv("GRIDWIRE_BENCH_PAIRS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			b.Fatalf("GRIDWIRE_BENCH_PAIRS=%q: want a positive number", v)
		}
		o.targets.slurmPairs = n
	}
	for i := 0; i < b.N; i++ {
		row, err := benchSlurm(context.Background(), quietEnv(), o)
		if err != nil {
			b.Fatal(err)
		}
		b.Logf("CPU per job, whole machine: sbatch %.1f ms, gridwire %.1f ms; of which this process and its children: %.1f ms, %.1f ms",
			row.SbatchCPU.Machine, row.GridwireCPU.Machine, row.SbatchCPU.Process, row.GridwireCPU.Process)
		for _, n := range row.Notes {
			b.Log(n)
		}
		b.ReportMetric(row.SbatchPerSec, "sbatch-jobs/s")
		b.ReportMetric(row.GridwirePerSec, "gridwire-jobs/s")
		b.ReportMetric(row.OverheadPercent, "overhead-%")
	}
}

// targetBenchOpts are the bench's options for a target row: a scratch directory of the
// benchmark's, jobs as root allowed (the suite runs as root), and the jobs' working
// directories under $GRIDWIRE_BENCH_WORK_ROOT when that is set (e.g. /dev/shm, to take
// the disk's cost of creating files out of a comparison).
func targetBenchOpts(b *testing.B) *benchOpts {
	b.Helper()
	o := &benchOpts{data: b.TempDir(), allowRoot: true}
	if parent := os.Getenv("GRIDWIRE_BENCH_WORK_ROOT"); parent != "" {
		dir, err := os.MkdirTemp(parent, "gw-bench-")
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { os.RemoveAll(dir) })
		o.workRoot = dir
	}
	return o
}

func quietEnv() *env {
	return &env{getenv: func(string) string { return "" }, stdout: os.Stdout, stderr: os.Stderr}
}
