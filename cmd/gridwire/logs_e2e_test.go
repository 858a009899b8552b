//go:build e2e

package main

import (
	"context"
	"strings"
	"testing"

	"github.com/gridwire/gridwire/pkg/cluster"
	"github.com/gridwire/gridwire/pkg/sshx/sshtest"
	"go.yaml.in/yaml/v3"
)

// gridwire logs reads a job's output where it ran: over SFTP from a real OpenSSH host,
// and from the working directory a real Slurm job wrote on the cluster's file system.
func TestE2ELogsFromRemoteAndBatchTargets(t *testing.T) {
	srv := sshtest.StartOpenSSH(t)
	remote := cluster.Cluster{Name: "remote", Kind: cluster.KindSSH, Hosts: []string{srv.Addr}, User: srv.User,
		Identity: srv.ClientKeyFile, KnownHosts: srv.KnownHostsFile, Profile: "fork", LRMS: "Fork", WorkRoot: srv.Dir}
	for _, cl := range []cluster.Cluster{remote, slurmCluster(t)} {
		t.Run(cl.Name, func(t *testing.T) {
			data, err := yaml.Marshal(cluster.Config{Clusters: []cluster.Cluster{cl}})
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			server := serveCLI(t, "--config", writeFile(t, dir, "gridwire.yaml", string(data)))
			job := writeFile(t, dir, "job.json", `{"version":3,"executable":"/bin/sh",
				"arguments":["-c","echo out from `+cl.Name+`; echo err from `+cl.Name+` >&2"]}`)
			status, out, errOut := cli(context.Background(), "submit", "--wait", "--server", server, job)
			if status != 0 {
				t.Fatalf("submit --wait: %d %s %s", status, out, errOut)
			}
			id := strings.Fields(out)[0]
			for _, c := range []struct {
				args []string
				want string
			}{
				{[]string{"logs", id}, "out from " + cl.Name + "\n"},
				{[]string{"logs", "--stderr", id}, "err from " + cl.Name + "\n"},
				{[]string{"logs", "--follow", id}, "out from " + cl.Name + "\n"},
			} {
				status, out, errOut := cli(context.Background(), append(c.args, "--server", server)...)
				if status != 0 || out != c.want {
					t.Errorf("gridwire %v: %d %q %s; want %q", c.args, status, out, errOut, c.want)
				}
			}
		})
	}
}
