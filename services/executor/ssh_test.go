package executor

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/pkg/cluster"
	"github.com/gridwire/gridwire/pkg/sshx"
	"github.com/gridwire/gridwire/pkg/sshx/sshtest"
)

func sshCluster(srv *sshtest.Server, knownHosts string) cluster.Cluster {
	return cluster.Cluster{Name: "remote", Kind: cluster.KindSSH, Hosts: []string{srv.Addr}, User: os.Getenv("USER"),
		Identity: srv.ClientKeyFile, KnownHosts: knownHosts, Profile: "fork", LRMS: "Fork"}
}

func sshTarget(t *testing.T, cl cluster.Cluster) *ScriptTarget {
	t.Helper()
	if cl.User == "" {
		cl.User = "gridwire"
	}
	tg, closeFn, err := NewTarget(cl, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(closeFn)
	return tg.(*ScriptTarget)
}

// A job on an ssh cluster runs on the host through the profile's START, detached; the
// host key that was verified is recorded; a second start adopts the first run.
func TestSSHTargetStartsOnceAndRecordsHostKey(t *testing.T) {
	srv := sshtest.NewServer(t)
	tg := sshTarget(t, sshCluster(srv, srv.KnownHostsFile))
	root := t.TempDir()
	runs := filepath.Join(root, "runs")
	wd := filepath.Join(root, events.NewID())
	st := events.State{JobID: filepath.Base(wd), Incarnation: ptr(forkIncarnation("remote", wd, "echo run >> "+runs+"; exit 4"))}

	run, err := tg.Start(context.Background(), st)
	if err != nil {
		t.Fatal(err)
	}
	if run.HostKey != srv.HostKeyFingerprint || run.Host != srv.Addr || !run.Running || run.Adopted || run.NativeID == "" {
		t.Errorf("started %+v; want host %s, key %s, running, not adopted", run, srv.Addr, srv.HostKeyFingerprint)
	}
	if got := waitFile(t, filepath.Join(wd, events.ExitFile)); got != "4\n" {
		t.Errorf("exit status %q, want 4", got)
	}
	again, err := tg.Start(context.Background(), st)
	if err != nil {
		t.Fatal(err)
	}
	if !again.Adopted || again.NativeID != run.NativeID {
		t.Errorf("second start %+v; want the first run (%s) adopted", again, run.NativeID)
	}
	if got := waitFile(t, runs); got != "run\n" {
		t.Errorf("the job ran %d times", strings.Count(got, "run"))
	}
	if srv.Accepted() != 1 {
		t.Errorf("%d connections for two starts; want one pooled connection", srv.Accepted())
	}
}

// A host whose key known_hosts does not list is refused, naming the key presented.
func TestSSHTargetRefusesUnknownHostKey(t *testing.T) {
	srv := sshtest.NewServer(t)
	other := sshtest.NewServer(t)
	// A known_hosts file that lists another server's key under this server's address.
	kh := sshtest.WriteKnownHosts(t, t.TempDir(), "127.0.0.1:1", other.ClientSigner.PublicKey())
	tg := sshTarget(t, sshCluster(srv, kh))
	wd := filepath.Join(t.TempDir(), events.NewID())
	st := events.State{JobID: filepath.Base(wd), Incarnation: ptr(forkIncarnation("remote", wd, "true"))}
	_, err := tg.Start(context.Background(), st)
	if !errors.Is(err, sshx.ErrUnknownHostKey) {
		t.Fatalf("start: %v; want the unknown host key refused", err)
	}
	if !strings.Contains(err.Error(), srv.HostKeyFingerprint) {
		t.Errorf("refusal %q does not name the presented key %s", err, srv.HostKeyFingerprint)
	}
	if _, statErr := os.Stat(wd); !os.IsNotExist(statErr) {
		t.Errorf("something was written on a refused host: %v", statErr)
	}
}

// A host presenting a different key from the one known_hosts lists is refused.
func TestSSHTargetRefusesChangedHostKey(t *testing.T) {
	srv := sshtest.NewServer(t)
	newKey := srv.SetHostKey(sshtest.NewSigner(t))
	tg := sshTarget(t, sshCluster(srv, srv.KnownHostsFile))
	wd := filepath.Join(t.TempDir(), events.NewID())
	st := events.State{JobID: filepath.Base(wd), Incarnation: ptr(forkIncarnation("remote", wd, "true"))}
	_, err := tg.Start(context.Background(), st)
	if !errors.Is(err, sshx.ErrHostKeyChanged) {
		t.Fatalf("start: %v; want the changed host key refused", err)
	}
	if !strings.Contains(err.Error(), newKey) {
		t.Errorf("refusal %q does not name the presented key %s", err, newKey)
	}
}

// The profile's static scripts are uploaded once per host, where the plan says.
func TestSSHTargetInstallsStaticScripts(t *testing.T) {
	srv := sshtest.NewServer(t)
	tg := sshTarget(t, sshCluster(srv, srv.KnownHostsFile))
	root := t.TempDir()
	loc := filepath.Join(root, ".gridwire-bin", "gw-hello-0123456789abcdef")
	for i := 0; i < 2; i++ {
		wd := filepath.Join(root, events.NewID())
		inc := forkIncarnation("remote", wd, "true")
		inc.StaticScripts = map[string]events.Script{"gw-hello": {Body: "#!/bin/sh\necho hello\n", Location: loc}}
		inc.Scripts[events.ScriptStart] = events.Script{Body: "/bin/sh " + loc + " >/dev/null\n" + forkStart}
		if _, err := tg.Start(context.Background(), events.State{JobID: filepath.Base(wd), Incarnation: &inc}); err != nil {
			t.Fatal(err)
		}
		waitFile(t, filepath.Join(wd, events.ExitFile))
	}
	b, err := os.ReadFile(loc)
	if err != nil || string(b) != "#!/bin/sh\necho hello\n" {
		t.Fatalf("static script %q, %v", b, err)
	}
	if fi, _ := os.Stat(loc); fi.Mode().Perm() != 0o700 {
		t.Errorf("static script mode %v, want 0700", fi.Mode().Perm())
	}
}

// Cancel, hold and resume on an ssh cluster run the profile's scripts on the job's host.
func TestSSHTargetControlsTheRun(t *testing.T) {
	srv := sshtest.NewServer(t)
	tg := sshTarget(t, sshCluster(srv, srv.KnownHostsFile))
	wd := filepath.Join(t.TempDir(), events.NewID())
	st := events.State{JobID: filepath.Base(wd), Incarnation: ptr(forkIncarnation("remote", wd, "sleep 30"))}
	run, err := tg.Start(context.Background(), st)
	if err != nil {
		t.Fatal(err)
	}
	st.NativeID, st.Host = run.NativeID, run.Host
	for _, step := range []struct{ script, want string }{
		{events.ScriptHold, "T"}, {events.ScriptResume, "S"}, {events.ScriptAbort, ""},
	} {
		out, err := tg.Control(context.Background(), st, step.script)
		if err != nil || !out.OK() {
			t.Fatalf("%s: %v %s", step.script, err, out.Describe())
		}
		waitProc(t, run.NativeID, step.want)
	}
}

func ptr[T any](v T) *T { return &v }
