package sshx_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/gridwire/gridwire/pkg/sshx"
	"github.com/gridwire/gridwire/pkg/sshx/sshtest"
)

func writeFile(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "known_hosts")
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func hostKeyError(t *testing.T, err error, want error) *sshx.HostKeyError {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("error %v, want %v", err, want)
	}
	var hk *sshx.HostKeyError
	if !errors.As(err, &hk) {
		t.Fatalf("error %v is not a *HostKeyError", err)
	}
	return hk
}

func TestUnknownHostKeyRefused(t *testing.T) {
	srv := sshtest.NewServer(t)
	other := sshtest.NewSigner(t)
	kh := writeFile(t, knownhosts.Line([]string{"127.0.0.1:1"}, other.PublicKey())+"\n")
	pool := newPool(t, srv, func(c *sshx.Config) { c.KnownHostsFile = kh })

	_, err := pool.Client(testCtx(t), srv.Addr)
	t.Logf("refusal: %v", err)
	hk := hostKeyError(t, err, sshx.ErrUnknownHostKey)
	if hk.Fingerprint != srv.HostKeyFingerprint || hk.Host != srv.Addr {
		t.Errorf("HostKeyError names %s %s, want %s %s", hk.Host, hk.Fingerprint, srv.Addr, srv.HostKeyFingerprint)
	}
	for _, want := range []string{srv.HostKeyFingerprint, srv.Addr, kh} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
	if srv.Execs() != 0 {
		t.Error("a command ran on an unverified host")
	}
}

func TestChangedHostKeyRefused(t *testing.T) {
	srv := sshtest.NewServer(t)
	pool := newPool(t, srv)
	c := client(t, pool, srv.Addr)
	run(t, c, "true")

	newFP := srv.SetHostKey(sshtest.NewSigner(t))
	srv.DropConnections()
	waitDone(t, c)
	_, err := pool.Client(testCtx(t), srv.Addr)
	t.Logf("refusal: %v", err)
	hk := hostKeyError(t, err, sshx.ErrHostKeyChanged)
	if hk.Fingerprint != newFP {
		t.Errorf("HostKeyError.Fingerprint = %s, want the new key %s", hk.Fingerprint, newFP)
	}
	for _, want := range []string{newFP, srv.HostKeyFingerprint, srv.Addr} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
}

func TestChangedHostKeyTypeRefused(t *testing.T) {
	// known_hosts lists an ed25519 key; the host now has only an ECDSA key, so no
	// algorithm known_hosts can verify is on offer. Still a changed key, fingerprint and all.
	srv := sshtest.NewServer(t)
	pool := newPool(t, srv)
	ecdsaKey := sshtest.SignerFrom(t, sshtest.NewKey(t, "ecdsa"))
	srv.SetHostKey(ecdsaKey)

	_, err := pool.Client(testCtx(t), srv.Addr)
	hk := hostKeyError(t, err, sshx.ErrHostKeyChanged)
	if want := ssh.FingerprintSHA256(ecdsaKey.PublicKey()); hk.Fingerprint != want || hk.KeyType != ssh.KeyAlgoECDSA256 {
		t.Errorf("HostKeyError presents %s %s, want %s %s", hk.KeyType, hk.Fingerprint, ssh.KeyAlgoECDSA256, want)
	}
}

func TestHostKeyAlgorithmsFollowKnownHosts(t *testing.T) {
	// The host has three keys; known_hosts lists one. Whichever one it is, the handshake
	// must make the host present it (x/crypto alone would pick by its own preference and
	// then report a mismatch for two of the three).
	keys := map[string]ssh.Signer{}
	for _, kind := range []string{"ed25519", "rsa", "ecdsa"} {
		keys[kind] = sshtest.SignerFrom(t, sshtest.NewKey(t, kind))
	}
	srv := sshtest.NewServer(t, sshtest.WithHostKey(keys["rsa"], keys["ed25519"], keys["ecdsa"]))
	for kind, key := range keys {
		t.Run(kind, func(t *testing.T) {
			kh := writeFile(t, knownhosts.Line([]string{srv.Addr}, key.PublicKey())+"\n")
			pool := newPool(t, srv, func(c *sshx.Config) { c.KnownHostsFile = kh })
			c := client(t, pool, srv.Addr)
			if got, want := c.HostKeyFingerprint(), ssh.FingerprintSHA256(key.PublicKey()); got != want {
				t.Errorf("verified %s, want the %s key %s", got, kind, want)
			}
			run(t, c, "true")
		})
	}
}

func TestRevokedHostKeyRefused(t *testing.T) {
	srv := sshtest.NewServer(t)
	known, err := os.ReadFile(srv.KnownHostsFile)
	if err != nil {
		t.Fatal(err)
	}
	fields := strings.Fields(string(known)) // host keytype base64
	kh := writeFile(t, string(known)+"@revoked * "+fields[1]+" "+fields[2]+"\n")
	pool := newPool(t, srv, func(c *sshx.Config) { c.KnownHostsFile = kh })
	_, err = pool.Client(testCtx(t), srv.Addr)
	hostKeyError(t, err, sshx.ErrHostKeyRevoked)
}

func TestInsecureIgnoreHostKeyOnlyWhenSet(t *testing.T) {
	srv := sshtest.NewServer(t)
	pool := newPool(t, srv, func(c *sshx.Config) {
		c.KnownHostsFile = ""
		c.InsecureIgnoreHostKey = true
	})
	c := client(t, pool, srv.Addr)
	if c.HostKeyFingerprint() != srv.HostKeyFingerprint {
		t.Errorf("fingerprint %s, want %s", c.HostKeyFingerprint(), srv.HostKeyFingerprint)
	}
	// Without the flag, the same config is checked against ~/.ssh/known_hosts, which
	// cannot know this port's fresh key.
	t.Setenv("HOME", t.TempDir())
	_, err := sshx.NewPool(sshx.Config{User: "u", IdentityFiles: []string{srv.ClientKeyFile}}, nil)
	if !errors.Is(err, sshx.ErrConfig) || !strings.Contains(err.Error(), "known_hosts") {
		t.Errorf("NewPool without known_hosts: %v, want ErrConfig naming known_hosts", err)
	}
}

func TestKnownHostsParseErrorNamesLine(t *testing.T) {
	srv := sshtest.NewServer(t)
	kh := writeFile(t, "# comment\n[127.0.0.1]:22 ssh-ed25519 not-base64!\n")
	_, err := sshx.NewPool(sshx.Config{User: "u", IdentityFiles: []string{srv.ClientKeyFile}, KnownHostsFile: kh}, nil)
	if !errors.Is(err, sshx.ErrConfig) || !strings.Contains(err.Error(), kh+":2") {
		t.Errorf("NewPool: %v, want ErrConfig naming %s:2", err, kh)
	}
}
