//go:build e2e

package main

import (
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
	scratch := sshScratch(t, srv)
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
