//go:build e2e

package executor

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/pkg/cluster"
	"github.com/gridwire/gridwire/pkg/sshx/sshtest"
	"github.com/gridwire/gridwire/pkg/target"
)

// BenchmarkE2ESSHStarts compares, in one run against a real sshd on loopback, starting
// jobs on an ssh cluster (everything the executor does per job: the JOB script written,
// START under the start lock, the native ID parsed) with OpenSSH running `true` over a
// ControlMaster connection, 8 at a time. Two STARTs: the fork profile's, which runs the
// job on the host at once (its own processes and files share the two cores with
// everything else here), and one that only prints an ID, as a batch system's submit
// does on a separate machine: the cost of starting alone. gridwire also at 32 at a time
// (the executor's workers in the gridwire command).
func BenchmarkE2ESSHStarts(b *testing.B) {
	srv := sshtest.StartOpenSSH(b)
	args := append(srv.SSHArgs(), "-o", "ControlMaster=auto", "-o", "ControlPath="+filepath.Join(srv.Dir, "..", "cm-%C"),
		"-o", "ControlPersist=120")
	if out, err := exec.Command("ssh", append(args, "127.0.0.1", "true")...).CombinedOutput(); err != nil {
		b.Fatalf("ssh: %v %s", err, out)
	}
	defer exec.Command("ssh", append(args, "-O", "exit", "127.0.0.1")...).Run()
	tg, closeFn, err := NewTarget(cluster.Cluster{Name: "remote", Kind: cluster.KindSSH, Hosts: []string{srv.Addr}, User: srv.User,
		Identity: srv.ClientKeyFile, KnownHosts: srv.KnownHostsFile, Profile: "fork", LRMS: "Fork"}, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer closeFn()
	const n = 400
	starts := func(workers int, start string) float64 {
		var wds []string
		var mu sync.Mutex
		rate := concurrentlyN(b, n, workers, func() error {
			wd := filepath.Join(srv.Dir, events.NewID())
			inc := forkIncarnation("remote", wd, "true")
			if start != "" {
				inc.Scripts[events.ScriptStart] = events.Script{Body: start}
			}
			mu.Lock()
			wds = append(wds, wd)
			mu.Unlock()
			_, err := tg.Start(context.Background(), events.State{JobID: filepath.Base(wd), Incarnation: &inc})
			return err
		})
		if start == "" {
			for _, wd := range wds { // let the jobs end before the next measurement
				waitFile(b, filepath.Join(wd, events.ExitFile))
			}
		}
		return rate
	}
	for i := 0; i < b.N; i++ {
		openssh := concurrently(b, n, func() error { return exec.Command("ssh", append(args, "127.0.0.1", "true")...).Run() })
		fork := starts(8, "")
		submit := starts(8, "echo 4242\n")
		submit32 := starts(32, "echo 4242\n")
		b.ReportMetric(openssh, "openssh-cm-cmds/s")
		b.ReportMetric(fork, "fork-starts/s")
		b.ReportMetric(submit, "submit-starts/s")
		b.ReportMetric(submit32, "submit-starts-32/s")
		b.ReportMetric(fork/openssh, "ratio-fork")
		b.ReportMetric(submit/openssh, "ratio-submit")
	}
}

// BenchmarkE2ESlurmSubmit compares, in one run against a real Slurm (SLURM_CONF), the
// executor's submission of a job (JOB script written, sbatch under the start lock, the
// native ID parsed) with `sbatch --wrap true` run directly; both 8 at a time, and the
// executor also 32 at a time (the gridwire command's workers). It isolates what the
// executor adds to a submission from the rest of the pipeline.
func BenchmarkE2ESlurmSubmit(b *testing.B) {
	if os.Getenv("SLURM_CONF") == "" {
		b.Fatal("SLURM_CONF is not set: start Slurm with scripts/start-slurm.sh")
	}
	root := b.TempDir()
	tg := &ScriptTarget{Cluster: "hpc", Shells: []Shell{target.Local{}}, Batch: true}
	const n = 300
	gwSubmits := func(workers int) float64 {
		return concurrentlyN(b, n, workers, func() error {
			wd := filepath.Join(root, events.NewID())
			inc := batchIncarnation(wd)
			// The job --wrap makes: both sides submit the same work.
			inc.Scripts[events.ScriptJob] = events.Script{Body: "#!/bin/sh\ntrue\n"}
			inc.Scripts[events.ScriptStart] = events.Script{Body: "set -f\nexec sbatch --parsable --job-name=\"$GW_JOB_ID\" --chdir=\"$GW_WORKDIR\" " +
				"--output=/dev/null --error=/dev/null \"$GW_WORKDIR\"/.gridwire/job.sh\n"}
			_, err := tg.Start(context.Background(), events.State{JobID: filepath.Base(wd), Incarnation: &inc})
			return err
		})
	}
	sbatch := func() float64 {
		return concurrently(b, n, func() error {
			return exec.Command("sbatch", "--parsable", "--chdir="+root, "--output=/dev/null", "--error=/dev/null", "--wrap", "true").Run()
		})
	}
	for i := 0; i < b.N; i++ {
		// Each side twice, in turn, each from an empty queue: which side goes first
		// changed the ratio by tens of percent when each went once.
		var direct, gw, gw32 float64
		for round := 0; round < 2; round++ {
			drain(b)
			direct += sbatch() / 2
			drain(b)
			gw += gwSubmits(8) / 2
			drain(b)
			gw32 += gwSubmits(32) / 2
		}
		drain(b)
		b.ReportMetric(direct, "sbatch-submits/s")
		b.ReportMetric(gw, "gridwire-submits/s")
		b.ReportMetric(gw32, "gridwire-submits-32/s")
		b.ReportMetric(100*(direct/gw-1), "overhead-%")
		b.ReportMetric(100*(direct/gw32-1), "overhead-32-%")
	}
}

// drain waits until Slurm has no jobs left, so each side starts from an empty queue.
func drain(b *testing.B) {
	for {
		out, err := exec.Command("squeue", "-h", "-o", "%i").Output()
		if err != nil {
			b.Fatal(err)
		}
		if len(out) == 0 {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}
