package stager

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/pkg/cluster"
	"github.com/gridwire/gridwire/pkg/sshx/sshtest"
)

func sftpConfig(srv *sshtest.Server) Config {
	cfg := testConfig()
	cfg.SSH = SSHConfig{User: "stager", Identity: srv.ClientKeyFile, KnownHosts: srv.KnownHostsFile}
	cfg.Clusters = cluster.Config{Clusters: []cluster.Cluster{
		cluster.LocalFork(),
		{Name: "remote", Kind: cluster.KindSSH, Hosts: []string{srv.Addr}, User: "gw",
			Identity: srv.ClientKeyFile, KnownHosts: srv.KnownHostsFile, Profile: "linux"},
	}}
	return cfg
}

// tree lists the files below dir with their contents.
func tree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		out[filepath.ToSlash(rel)] = readFile(t, p)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestStageInDirectoryOverSFTP(t *testing.T) {
	srv := sshtest.NewServer(t)
	e := newEnv(t)
	e.start(sftpConfig(srv))
	remote := filepath.Join(srv.Home, "inputs")
	want := map[string]string{"one.txt": "1", "deep/two.txt": "22", "deep/er/three.txt": "333"}
	for p, c := range want {
		writeFile(t, filepath.Join(remote, p), c)
	}
	writeFile(t, filepath.Join(srv.Home, "single.txt"), "single")
	id := e.incarnate(events.Job{StageIn: []events.FileCopy{
		{From: "sftp://" + srv.Addr + remote + "/", To: "in"},
		{From: "scp://someone@" + srv.Addr + filepath.Join(srv.Home, "single.txt"), To: "single.txt"},
	}}, "local", "")
	st := e.waitStatus(id, events.StatusQueued)
	if diff := cmp.Diff(want, tree(t, filepath.Join(st.Incarnation.WorkDir, "in"))); diff != "" {
		t.Errorf("staged directory (-want +got):\n%s", diff)
	}
	if got := readFile(t, filepath.Join(st.Incarnation.WorkDir, "single.txt")); got != "single" {
		t.Errorf("scp alias staged %q", got)
	}
	for _, tr := range st.Transfers {
		if tr.To == "in" && (!tr.Directory || tr.Files != 3 || tr.Bytes != 6 || tr.SHA256 == "") {
			t.Errorf("directory record: %+v", tr)
		}
	}
}

// On an ssh cluster the working directory is on the cluster's host: files go there over
// SFTP, and come back from there.
func TestSSHClusterWorkDirIsOnTheHost(t *testing.T) {
	srv := sshtest.NewServer(t)
	e := newEnv(t)
	e.start(sftpConfig(srv))
	local := t.TempDir()
	writeFile(t, filepath.Join(local, "input.txt"), "to the cluster")
	wd := filepath.Join(srv.Home, "jobs", "j1")
	id := e.incarnate(events.Job{
		DefaultStorageBase: "file://" + local,
		Stdin:              "input.txt",
		StageIn:            []events.FileCopy{{From: "input.txt", To: "work/input.txt"}},
		Stdout:             []string{"stdout.txt", "sftp://" + srv.Addr + filepath.Join(srv.Home, "archive", "stdout.txt")},
		StageOut:           []events.FileCopy{{From: "work/", To: "back/", Directory: true}},
		Cleanup:            []string{"work"},
	}, "remote", wd)
	e.waitStatus(id, events.StatusQueued)
	if got := readFile(t, filepath.Join(wd, "work/input.txt")); got != "to the cluster" {
		t.Errorf("stage-in on the host: %q", got)
	}
	if got := readFile(t, filepath.Join(wd, events.StdinFile)); got != "to the cluster" {
		t.Errorf("stdin on the host: %q", got)
	}
	writeFile(t, filepath.Join(wd, events.StdoutFile), "ran remotely")
	writeFile(t, filepath.Join(wd, "work/result.txt"), "result")
	e.exit(id, 0)
	st := e.waitStagedOut(id)
	if !st.StagedOut.OK {
		t.Fatalf("staged_out: %+v", st.StagedOut)
	}
	if got := readFile(t, filepath.Join(local, "stdout.txt")); got != "ran remotely" {
		t.Errorf("stdout to the gateway: %q", got)
	}
	if got := readFile(t, filepath.Join(srv.Home, "archive", "stdout.txt")); got != "ran remotely" {
		t.Errorf("stdout by sftp: %q", got)
	}
	if diff := cmp.Diff(map[string]string{"input.txt": "to the cluster", "result.txt": "result"}, tree(t, filepath.Join(local, "back"))); diff != "" {
		t.Errorf("directory out (-want +got):\n%s", diff)
	}
	if _, err := os.Stat(filepath.Join(wd, "work")); !os.IsNotExist(err) {
		t.Errorf("cleanup on the host: %v", err)
	}
}

// The usual case: a new job's directory under a work root that exists, nothing to stage.
func TestSSHClusterWorkDirUnderAnExistingRoot(t *testing.T) {
	srv := sshtest.NewServer(t)
	e := newEnv(t)
	e.start(sftpConfig(srv))
	root := filepath.Join(srv.Home, "jobs")
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a", "b"} {
		wd := filepath.Join(root, name)
		e.waitStatus(e.incarnate(events.Job{}, "remote", wd), events.StatusQueued)
		if fi, err := os.Stat(filepath.Join(wd, events.ControlDir)); err != nil || !fi.IsDir() {
			t.Errorf("%s: control directory on the host: %v", name, err)
		}
	}
}

func TestSSHWorkDirRefusesSymlinkEscape(t *testing.T) {
	srv := sshtest.NewServer(t)
	e := newEnv(t)
	e.start(sftpConfig(srv))
	local := t.TempDir()
	writeFile(t, filepath.Join(local, "x"), "x")
	outside := t.TempDir()
	wd := filepath.Join(srv.Home, "jobs", "j2")
	if err := os.MkdirAll(wd, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(wd, "out")); err != nil {
		t.Fatal(err)
	}
	id := e.incarnate(events.Job{DefaultStorageBase: "file://" + local,
		StageIn: []events.FileCopy{{From: "x", To: "out/x"}}}, "remote", wd)
	st := e.waitStatus(id, events.StatusFailed)
	if !strings.Contains(st.Reason, "outside the working directory") {
		t.Errorf("reason: %q", st.Reason)
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 0 {
		t.Errorf("written through the symlink: %v", entries)
	}
}

// sftp:// follows the same known_hosts rules as the executor: a host whose key the file
// does not list is refused, once, naming the presented key.
func TestSFTPRefusesAnUnknownHostKey(t *testing.T) {
	srv := sshtest.NewServer(t)
	other := sshtest.NewServer(t)
	e := newEnv(t)
	cfg := sftpConfig(srv)
	cfg.SSH.KnownHosts = other.KnownHostsFile // lists the other server only
	e.start(cfg)
	writeFile(t, filepath.Join(srv.Home, "f"), "f")
	id := e.incarnate(events.Job{MaxTransferAttempts: 3, StageIn: []events.FileCopy{
		{From: "sftp://" + srv.Addr + filepath.Join(srv.Home, "f"), To: "f"}}}, "local", "")
	st := e.waitStatus(id, events.StatusFailed)
	if len(st.Transfers) != 1 || !st.Transfers[0].Permanent || !strings.Contains(st.Reason, srv.HostKeyFingerprint) {
		t.Errorf("reason %q, transfers %+v", st.Reason, st.Transfers)
	}
}

// sftp and scp URLs a job names dial through the network policy as http does: the
// gateway's own sshd on loopback is refused by default, known_hosts or not; a cluster's
// hosts, which the operator names, are not policed.
func TestSFTPURLsObeyTheNetworkPolicy(t *testing.T) {
	srv := sshtest.NewServer(t)
	writeFile(t, filepath.Join(srv.Home, "secret"), "from the gateway's sshd")
	cfg := sftpConfig(srv)
	cfg.HTTP = HTTPPolicy{}
	s, err := newStager(context.Background(), cfg.withDefaults(), Deps{Logger: discard()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, u := range []string{"sftp://" + srv.Addr + filepath.Join(srv.Home, "secret"), "scp://root@" + srv.Addr + "/etc/shadow"} {
		r, err := resolveRemote(u, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		_, _, err = s.remoteEndpoint(t.Context(), r, scope{})
		if !errors.Is(err, ErrPolicy) || !isPermanent(err) {
			t.Errorf("%s: %v, want a permanent policy refusal", u, err)
		}
	}
}
