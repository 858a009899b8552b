//go:build e2e

package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/gridwire/gridwire/pkg/cluster"
	"github.com/gridwire/gridwire/pkg/sshx/sshtest"
)

// The profile that uses every part of the GPE OS profile spec, and JSDL and v3 jobs
// that choose its parts, over a real OpenSSH server: START and GET_JOB_STATUS run on
// the host, the static scripts are installed there, and the stager writes JSDL's
// unstaged Output and Error over SFTP.
func TestE2EGPEProfileOverSSH(t *testing.T) {
	srv := sshtest.StartOpenSSH(t)
	scratch := sshScratch(t, srv)
	cfg := cluster.Config{ProfileDir: gpeProfileDir(t), Clusters: []cluster.Cluster{{Name: "remote", Kind: cluster.KindSSH,
		Hosts: []string{srv.Addr}, User: srv.User, Identity: srv.ClientKeyFile, KnownHosts: srv.KnownHostsFile,
		Profile: "gpe-full", LRMS: "Fork", WorkRoot: srv.Dir,
		Fields: map[string]string{"SCRATCH_BASE": scratch}, Info: cluster.SystemInfo{OSName: "Linux"}}}}
	h := newHarnessWith(t, cfg)
	checkGPEProfileParts(t, h, scratch, "Linux")
}

// sshScratch makes a directory the SSH login user owns, for the gpe-full profile's
// SCRATCH storage, outside t.TempDir(): its 0700 parent keeps the SSH user out when
// tests run as root.
func sshScratch(t *testing.T, srv *sshtest.OpenSSH) string {
	t.Helper()
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
	return scratch
}
