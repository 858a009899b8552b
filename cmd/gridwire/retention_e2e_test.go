//go:build e2e

package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/pkg/cluster"
	"github.com/gridwire/gridwire/pkg/sshx/sshtest"
)

// Over a real OpenSSH server, an ssh cluster with retention 0 removes each ended job's
// working directory on the host with the profile's DELETE, a static script installed
// there, and records it after the job's end; the log verifies and is sound.
func TestE2ERetentionOverSSH(t *testing.T) {
	srv := sshtest.StartOpenSSH(t)
	// Not under t.TempDir(): its 0700 parent keeps the SSH user out when tests run as root.
	root, err := os.MkdirTemp("", "gw-e2e-scratch-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	scratch := filepath.Join(root, "scratch")
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(scratch, 0o755); err != nil {
		t.Fatal(err)
	}
	srv.Own(t, scratch)
	cfg := cluster.Config{ProfileDir: gpeProfileDir(t), Clusters: []cluster.Cluster{{Name: "remote", Kind: cluster.KindSSH,
		Hosts: []string{srv.Addr}, User: srv.User, Identity: srv.ClientKeyFile, KnownHosts: srv.KnownHostsFile,
		Profile: "gpe-full", LRMS: "Fork", WorkRoot: srv.Dir, Retention: &cluster.Retention{},
		Fields: map[string]string{"SCRATCH_BASE": scratch}, Info: cluster.SystemInfo{OSName: "Linux"}}}}
	h := newHarnessWith(t, cfg)
	ok := h.submitJSON(map[string]any{"version": 3, "executable": "/bin/sh", "arguments": []string{"-c", "echo kept > out.txt"},
		"x-gpe": map[string]any{"application": "report", "application_version": "1.0"}})
	bad := h.submitJSON(map[string]any{"version": 3, "executable": "/bin/sh", "arguments": []string{"-c", "exit 3"},
		"x-gpe": map[string]any{"application": "report", "application_version": "1.0"}})
	for id, want := range map[string]events.Status{ok: events.StatusSucceeded, bad: events.StatusFailed} {
		st := h.waitFor(id, "directory_deleted", func(st events.State) bool { return st.DirectoryDeleted != nil })
		if st.DirectoryDeleted.Host != srv.Addr || filepath.Dir(st.Incarnation.WorkDir) != srv.Dir {
			t.Fatalf("job %s: removed on %q in %s, want %s in %s", id, st.DirectoryDeleted.Host, st.Incarnation.WorkDir, srv.Addr, srv.Dir)
		}
		checkDeleted(t, h, st, want)
	}
	checkAudit(t, h, ok, bad)
}
