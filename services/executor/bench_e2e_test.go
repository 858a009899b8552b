//go:build e2e

package executor

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/pkg/cluster"
	"github.com/gridwire/gridwire/pkg/sshx/sshtest"
)

// BenchmarkE2ESSHStarts compares, in one run against a real sshd on loopback, starting
// jobs on an ssh cluster (the fork profile's START, the JOB script uploaded by SFTP,
// the start lock: everything the executor does per job) with OpenSSH running `true`
// over a ControlMaster connection; both 8 at a time.
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
	for i := 0; i < b.N; i++ {
		openssh := concurrently(b, n, func() error { return exec.Command("ssh", append(args, "127.0.0.1", "true")...).Run() })
		gw := concurrently(b, n, func() error {
			wd := filepath.Join(srv.Dir, events.NewID())
			_, err := tg.Start(context.Background(), events.State{JobID: filepath.Base(wd), Incarnation: ptr(forkIncarnation("remote", wd, "true"))})
			return err
		})
		b.ReportMetric(openssh, "openssh-cm-cmds/s")
		b.ReportMetric(gw, "gridwire-starts/s")
		b.ReportMetric(gw/openssh, "ratio")
	}
}

// BenchmarkE2ESlurmSubmit compares, in one run against a real Slurm (SLURM_CONF), the
// executor's submission of a job (JOB script written, sbatch under the start lock, the
// native ID parsed) with `sbatch --wrap true` run directly; both 8 at a time. It
// isolates what the executor adds to a submission from the rest of the pipeline.
func BenchmarkE2ESlurmSubmit(b *testing.B) {
	if os.Getenv("SLURM_CONF") == "" {
		b.Fatal("SLURM_CONF is not set: start Slurm with scripts/start-slurm.sh")
	}
	root := b.TempDir()
	tg := &ScriptTarget{Cluster: "hpc", Shells: []Shell{LocalShell{}}, Batch: true}
	const n = 300
	for i := 0; i < b.N; i++ {
		gw := concurrently(b, n, func() error {
			wd := filepath.Join(root, events.NewID())
			inc := batchIncarnation(wd)
			inc.Scripts[events.ScriptStart] = events.Script{Body: "set -f\nexec sbatch --parsable --job-name=\"$GW_JOB_ID\" --chdir=\"$GW_WORKDIR\" " +
				"--output=/dev/null --error=/dev/null \"$GW_WORKDIR\"/.gridwire/job.sh\n"}
			_, err := tg.Start(context.Background(), events.State{JobID: filepath.Base(wd), Incarnation: &inc})
			return err
		})
		drain(b)
		direct := concurrently(b, n, func() error {
			return exec.Command("sbatch", "--parsable", "--chdir="+root, "--output=/dev/null", "--error=/dev/null", "--wrap", "true").Run()
		})
		drain(b)
		b.ReportMetric(direct, "sbatch-submits/s")
		b.ReportMetric(gw, "gridwire-submits/s")
		b.ReportMetric(100*(direct/gw-1), "overhead-%")
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
