package sshx_test

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"net"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"

	"github.com/gridwire/gridwire/pkg/sshx"
	"github.com/gridwire/gridwire/pkg/sshx/sshtest"
)

func TestKeyFileFormats(t *testing.T) {
	rsaKey := sshtest.NewKey(t, "rsa")
	ecKey := sshtest.NewKey(t, "ecdsa")
	edKey := sshtest.NewKey(t, "ed25519")
	ecDER, err := x509.MarshalECPrivateKey(ecKey.(*ecdsa.PrivateKey))
	if err != nil {
		t.Fatal(err)
	}
	pkcs8, err := x509.MarshalPKCS8PrivateKey(edKey)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	files := map[string]string{
		"rsa-openssh":     sshtest.WritePrivateKey(t, dir, "rsa-openssh", rsaKey),
		"rsa-pkcs1-pem":   sshtest.WritePEM(t, dir, "rsa-pem", &pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(rsaKey.(*rsa.PrivateKey))}),
		"ecdsa-openssh":   sshtest.WritePrivateKey(t, dir, "ec-openssh", ecKey),
		"ecdsa-sec1-pem":  sshtest.WritePEM(t, dir, "ec-pem", &pem.Block{Type: "EC PRIVATE KEY", Bytes: ecDER}),
		"ed25519-openssh": sshtest.WritePrivateKey(t, dir, "ed-openssh", edKey),
		"ed25519-pkcs8":   sshtest.WritePEM(t, dir, "ed-pkcs8", &pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8}),
	}
	var opts []sshtest.Option
	for _, k := range []crypto.Signer{rsaKey, ecKey, edKey} {
		pub, err := ssh.NewPublicKey(k.Public())
		if err != nil {
			t.Fatal(err)
		}
		opts = append(opts, sshtest.WithAuthorizedKey(pub))
	}
	srv := sshtest.NewServer(t, opts...)
	for name, file := range files {
		t.Run(name, func(t *testing.T) {
			pool := newPool(t, srv, func(c *sshx.Config) { c.IdentityFiles = []string{file} })
			run(t, client(t, pool, srv.Addr), "true")
		})
	}
}

func TestKeyNotAuthorizedFails(t *testing.T) {
	srv := sshtest.NewServer(t)
	stranger := sshtest.WritePrivateKey(t, t.TempDir(), "id", sshtest.NewKey(t, "ed25519"))
	pool := newPool(t, srv, func(c *sshx.Config) { c.IdentityFiles = []string{stranger} })
	_, err := pool.Client(testCtx(t), srv.Addr)
	if err == nil || !strings.Contains(err.Error(), "unable to authenticate") {
		t.Errorf("Client with an unauthorized key: %v", err)
	}
}

func TestEncryptedKeyRefused(t *testing.T) {
	srv := sshtest.NewServer(t)
	block, err := ssh.MarshalPrivateKeyWithPassphrase(sshtest.NewKey(t, "ed25519"), "", []byte("secret"))
	if err != nil {
		t.Fatal(err)
	}
	file := sshtest.WritePEM(t, t.TempDir(), "id_enc", block)
	_, err = sshx.NewPool(sshx.Config{User: "u", IdentityFiles: []string{file}, KnownHostsFile: srv.KnownHostsFile}, nil)
	if !errors.Is(err, sshx.ErrEncryptedKey) || !strings.Contains(err.Error(), file) {
		t.Errorf("NewPool with an encrypted key: %v, want ErrEncryptedKey naming the file", err)
	}
}

func TestAgentAuth(t *testing.T) {
	srv := sshtest.NewServer(t)
	keyring := agent.NewKeyring()
	key := sshtest.NewKey(t, "ed25519")
	if err := keyring.Add(agent.AddedKey{PrivateKey: key}); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(t.TempDir(), "agent.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				agent.ServeAgent(keyring, conn)
			}()
		}
	}()
	t.Setenv("SSH_AUTH_SOCK", sock)
	pub := sshtest.SignerFrom(t, key).PublicKey()
	withAgentKey := sshtest.NewServer(t, sshtest.WithAuthorizedKey(pub))
	pool := newPool(t, withAgentKey, func(c *sshx.Config) {
		c.IdentityFiles = nil
		c.UseAgent = true
	})
	run(t, client(t, pool, withAgentKey.Addr), "true")

	// The agent's key is not authorized on srv: agent auth must really be what worked.
	pool = newPool(t, srv, func(c *sshx.Config) {
		c.IdentityFiles = nil
		c.UseAgent = true
	})
	if _, err := pool.Client(testCtx(t), srv.Addr); err == nil {
		t.Error("agent key accepted by a server that does not authorize it")
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		cfg  sshx.Config
		want string
	}{
		{sshx.Config{}, "IdentityFiles"},
		{sshx.Config{IdentityFiles: []string{"k"}, DialTimeout: -1}, "DialTimeout"},
		{sshx.Config{IdentityFiles: []string{"k"}, MaxSessionsPerConn: -2}, "MaxSessionsPerConn"},
	}
	for _, tt := range tests {
		err := tt.cfg.Validate()
		if !errors.Is(err, sshx.ErrConfig) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Validate(%+v) = %v, want ErrConfig naming %s", tt.cfg, err, tt.want)
		}
	}
}
