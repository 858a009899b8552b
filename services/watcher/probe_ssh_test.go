package watcher

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/pkg/cluster"
	"github.com/gridwire/gridwire/pkg/sshx"
	"github.com/gridwire/gridwire/pkg/sshx/sshtest"
)

func sshProber(t *testing.T, f *probeFixture, srv *sshtest.Server, knownHosts string) *ScriptProber {
	t.Helper()
	user := os.Getenv("USER")
	if user == "" {
		user = "gridwire"
	}
	cl := cluster.Cluster{Name: "remote", Kind: cluster.KindSSH, Hosts: []string{srv.Addr}, User: user,
		Identity: srv.ClientKeyFile, KnownHosts: knownHosts, Profile: "slurm", LRMS: "Slurm"}
	p, closeFn, err := NewSSHProber(cl, f.prober(0).Lookup, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(closeFn)
	for id, st := range f.states {
		st.Host = srv.Addr
		f.states[id] = st
	}
	return p
}

// An ssh cluster's jobs are probed with one remote command per host and poll.
func TestSSHProberOneCommandPerPoll(t *testing.T) {
	srv := sshtest.NewServer(t)
	f := newProbeFixture(t)
	status := statusScript(f.dir)
	jobs := []Watched{
		f.job(t, "J1", "101", "RUNNING", -1, status),
		f.job(t, "J2", "102", "", 7, status),
		f.job(t, "J3", "103", "", -1, status),
	}
	p := sshProber(t, f, srv, srv.KnownHostsFile)
	got, err := p.Probe(context.Background(), jobs)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]Observation{"J1": {State: events.StatusRunning, NativeState: "RUNNING"},
		"J2": {Exited: true, ExitCode: 7}, "J3": {Gone: true}}
	for id, w := range want {
		if got[id] != w {
			t.Errorf("%s: %+v, want %+v", id, got[id], w)
		}
	}
	if srv.Execs() != 1 {
		t.Errorf("%d remote commands for one poll of %d jobs, want 1", srv.Execs(), len(jobs))
	}
}

// A host whose key changed is not asked: the poll fails (status_unknown follows) with
// the presented key in the error.
func TestSSHProberRefusesChangedHostKey(t *testing.T) {
	srv := sshtest.NewServer(t)
	newKey := srv.SetHostKey(sshtest.NewSigner(t))
	f := newProbeFixture(t)
	w := f.job(t, "J1", "101", "RUNNING", -1, statusScript(f.dir))
	p := sshProber(t, f, srv, srv.KnownHostsFile)
	_, err := p.Probe(context.Background(), []Watched{w})
	if !errors.Is(err, sshx.ErrHostKeyChanged) || !strings.Contains(err.Error(), newKey) {
		t.Fatalf("probe: %v; want the changed key %s refused", err, newKey)
	}
}
