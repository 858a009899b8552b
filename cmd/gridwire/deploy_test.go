package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// deploy/nats/ is scripts/nats-cluster.sh's output as docs/cluster.md says (hosts
// nats-1..3, clusters local and hpc1, no secrets): a permission changed in the script
// and not in the files, or by hand in the files, is caught here.
func TestDeployNATSIsTheScriptsOutput(t *testing.T) {
	out := t.TempDir()
	cmd := exec.Command("bash", "../../scripts/nats-cluster.sh", out,
		"--nodes", "n1=nats-1:4222:6222 n2=nats-2:4222:6222 n3=nats-3:4222:6222", "--clusters", "local,hpc1",
		"--certs", "/etc/gridwire/nats", "--store", "/var/lib/gridwire/nats", "--no-secrets")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("nats-cluster.sh: %v\n%s", err, b)
	}
	for _, name := range []string{"accounts.conf", "n1.conf", "n2.conf", "n3.conf"} {
		made, err := os.ReadFile(filepath.Join(out, name))
		if err != nil {
			t.Fatal(err)
		}
		kept, err := os.ReadFile(filepath.Join("..", "..", "deploy", "nats", name))
		if err != nil {
			t.Fatal(err)
		}
		if string(made) != string(kept) {
			t.Errorf("deploy/nats/%s is not what scripts/nats-cluster.sh writes; run it again as docs/cluster.md says", name)
		}
	}
}
