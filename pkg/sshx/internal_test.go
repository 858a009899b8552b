package sshx

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/gridwire/gridwire/pkg/sshx/sshtest"
)

func TestBackoffGrowsWithJitterUpToMax(t *testing.T) {
	const initial, limit = 100 * time.Millisecond, 2 * time.Second
	tests := []struct {
		failures int
		base     time.Duration
	}{{1, 100 * time.Millisecond}, {2, 200 * time.Millisecond}, {4, 800 * time.Millisecond}, {5, 1600 * time.Millisecond}, {6, limit}, {60, limit}}
	for _, tt := range tests {
		seen := map[time.Duration]bool{}
		for range 200 {
			d := backoff(initial, limit, tt.failures)
			if d < tt.base/2 || d > tt.base {
				t.Fatalf("backoff after %d failures = %v, want within [%v, %v]", tt.failures, d, tt.base/2, tt.base)
			}
			seen[d] = true
		}
		if len(seen) < 10 {
			t.Errorf("backoff after %d failures took only %d distinct values: no jitter", tt.failures, len(seen))
		}
	}
}

func TestAlgorithmsForKnownKeys(t *testing.T) {
	keys := map[string]knownhosts.KnownKey{}
	key := func(kind string) knownhosts.KnownKey { // RSA keys are slow to make: one of each
		if _, ok := keys[kind]; !ok {
			keys[kind] = knownhosts.KnownKey{Key: sshtest.SignerFrom(t, sshtest.NewKey(t, kind)).PublicKey()}
		}
		return keys[kind]
	}
	tests := []struct {
		name string
		keys []knownhosts.KnownKey
		want []string
	}{
		{"none", nil, nil},
		{"ed25519", []knownhosts.KnownKey{key("ed25519")}, []string{ssh.KeyAlgoED25519}},
		{"rsa", []knownhosts.KnownKey{key("rsa")}, []string{ssh.KeyAlgoRSASHA512, ssh.KeyAlgoRSASHA256, ssh.KeyAlgoRSA}},
		{"rsa and ecdsa, preference order", []knownhosts.KnownKey{key("rsa"), key("ecdsa")},
			[]string{ssh.KeyAlgoECDSA256, ssh.KeyAlgoRSASHA512, ssh.KeyAlgoRSASHA256, ssh.KeyAlgoRSA}},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, algorithmsFor(tt.keys)); diff != "" {
			t.Errorf("%s: algorithmsFor (-want +got):\n%s", tt.name, diff)
		}
	}
}

func TestWithPort(t *testing.T) {
	for in, want := range map[string]string{
		"hpc1":          "hpc1:22",
		"hpc1:2222":     "hpc1:2222",
		"127.0.0.1":     "127.0.0.1:22",
		"[::1]:2022":    "[::1]:2022",
		"10.0.0.1:22":   "10.0.0.1:22",
		"login.example": "login.example:22",
	} {
		if got := withPort(in); got != want {
			t.Errorf("withPort(%q) = %q, want %q", in, got, want)
		}
	}
}
