package sshtest

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/pem"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/crypto/ssh"
)

// NewSigner generates an ed25519 signer, for a host key or a client key.
func NewSigner(t testing.TB) ssh.Signer {
	t.Helper()
	return signerFrom(t, NewKey(t, "ed25519"))
}

// NewKey generates a private key of the given kind ("ed25519", "rsa" (2048 bits) or
// "ecdsa" (P-256)).
func NewKey(t testing.TB, kind string) crypto.Signer {
	t.Helper()
	var (
		key crypto.Signer
		err error
	)
	switch kind {
	case "ed25519":
		_, key, err = ed25519.GenerateKey(rand.Reader)
	case "rsa":
		key, err = rsa.GenerateKey(rand.Reader, 2048)
	case "ecdsa":
		key, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	default:
		t.Fatalf("sshtest: unknown key kind %q", kind)
	}
	if err != nil {
		t.Fatalf("sshtest: generating %s key: %v", kind, err)
	}
	return key
}

// SignerFrom wraps a private key as an ssh.Signer.
func SignerFrom(t testing.TB, key crypto.Signer) ssh.Signer {
	t.Helper()
	return signerFrom(t, key)
}

func signerFrom(t testing.TB, key crypto.Signer) ssh.Signer {
	t.Helper()
	s, err := ssh.NewSignerFromSigner(key)
	if err != nil {
		t.Fatalf("sshtest: %v", err)
	}
	return s
}

// WritePrivateKey writes key as an unencrypted OpenSSH private key file named name in
// dir, mode 0600, and returns its path.
func WritePrivateKey(t testing.TB, dir, name string, key crypto.Signer) string {
	t.Helper()
	block, err := ssh.MarshalPrivateKey(key, "")
	if err != nil {
		t.Fatalf("sshtest: %v", err)
	}
	return WritePEM(t, dir, name, block)
}

// WritePEM writes block to dir/name with mode 0600 and returns its path.
func WritePEM(t testing.TB, dir, name string, block *pem.Block) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatalf("sshtest: %v", err)
	}
	return path
}
