package executor

import (
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/pkg/cluster"
)

// A gateway running as root does not start a fork cluster that would run jobs as root
// by accident: without run_as it refuses, naming the way out; allow_root is the
// operator's explicit consent.
func TestForkClusterRefusesRootJobsWithoutRunAs(t *testing.T) {
	cl := cluster.Cluster{Name: "local", Kind: cluster.KindFork, Profile: "fork", LRMS: "Fork"}
	if _, err := runAsOf(cl, 0); !errors.Is(err, ErrRootJobs) || !strings.Contains(err.Error(), "run_as") {
		t.Errorf("as root without run_as: %v", err)
	}
	cl.AllowRoot = true
	if as, err := runAsOf(cl, 0); err != nil || as != nil {
		t.Errorf("as root with allow_root: %v %v", as, err)
	}
	cl.AllowRoot = false
	if as, err := runAsOf(cl, 1000); err != nil || as != nil {
		t.Errorf("not root: %v %v", as, err)
	}
	cl.RunAs = "nobody"
	if _, err := runAsOf(cl, 1000); err == nil || !strings.Contains(err.Error(), "needs the gateway to run as root") {
		t.Errorf("run_as another user, not as root: %v", err)
	}
	cl.RunAs = "no-such-user-here"
	if _, err := runAsOf(cl, 0); err == nil {
		t.Error("an unknown run_as user was accepted")
	}
	cl.RunAs = ""
	if os.Geteuid() == 0 {
		if _, _, err := NewTarget(cl, nil, nil); !errors.Is(err, ErrRootJobs) {
			t.Errorf("NewTarget as root without run_as: %v", err)
		}
	}
}

// With run_as, a fork job runs as that user: it owns its working directory, cannot read
// a file only root may read, and what it writes is its own.
func TestForkJobRunsAsRunAsUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("switching users needs root; TestForkClusterRefusesRootJobsWithoutRunAs covers the refusals")
	}
	nobody, err := user.Lookup("nobody")
	if err != nil {
		t.Skip("no user nobody on this host")
	}
	base := t.TempDir()
	for d := base; d != "/"; d = filepath.Dir(d) { // the user must reach its directory
		fi, err := os.Stat(d)
		if err == nil && fi.Mode().Perm()&0o001 == 0 {
			if err := os.Chmod(d, fi.Mode().Perm()|0o011); err != nil {
				t.Fatal(err)
			}
		}
	}
	secret := filepath.Join(base, "root-only")
	if err := os.WriteFile(secret, []byte("secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t)
	cl := localCluster()
	cl.AllowRoot, cl.RunAs = false, "nobody"
	e.run(Config{Cluster: cl, ID: "x1"}, nil)
	wd := filepath.Join(base, events.NewID())
	if err := os.MkdirAll(filepath.Join(wd, events.ControlDir), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(wd, "staged"), []byte("in"), 0o644); err != nil { // as the stager would
		t.Fatal(err)
	}
	id := e.queue(forkIncarnation("local", wd, "id -u; cat "+secret+" || echo refused; echo mine > made; cat staged"))
	e.waitFor(id, "RUNNING", func(s events.State) bool { return s.Status == events.StatusRunning })
	waitFile(t, filepath.Join(wd, events.ExitFile))
	out, _ := os.ReadFile(filepath.Join(wd, events.ControlDir, "stdout"))
	if got := string(out); got != nobody.Uid+"\nrefused\nin" {
		t.Errorf("job output %q, want uid %s, a refused read and the staged file", got, nobody.Uid)
	}
	fi, err := os.Stat(filepath.Join(wd, "made"))
	if err != nil {
		t.Fatal(err)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); !ok || fmt.Sprint(st.Uid) != nobody.Uid {
		t.Errorf("a file the job made is owned by %+v, want uid %s", fi.Sys(), nobody.Uid)
	}
}
