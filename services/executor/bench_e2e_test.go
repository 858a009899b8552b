//go:build e2e

package executor

import (
	"context"
	"os/exec"
	"path/filepath"
	"testing"

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
