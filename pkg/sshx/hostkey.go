package sshx

import (
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// Host-key refusals; the *HostKeyError that carries them names the host, the key the
// server presented and what known_hosts lists.
var (
	ErrUnknownHostKey = errors.New("sshx: unknown host key")
	ErrHostKeyChanged = errors.New("sshx: host key changed")
	ErrHostKeyRevoked = errors.New("sshx: host key revoked")
)

// errNoKnownKeyType stands for a mismatch when the server has no key of any type
// known_hosts lists for it.
var errNoKnownKeyType = errors.New("sshx: no host key of a type known_hosts lists")

// HostKeyError is a host key sshx refused.
type HostKeyError struct {
	// Host is the host:port as dialled.
	Host string
	// KeyType and Fingerprint (SHA256:...) describe the key the server presented;
	// both are empty when the server could not be made to present one.
	KeyType, Fingerprint string
	// KnownHostsFile is the file checked.
	KnownHostsFile string
	// Known lists what KnownHostsFile holds for Host, as "file:line: type SHA256:...".
	Known []string
	// Reason is ErrUnknownHostKey, ErrHostKeyChanged or ErrHostKeyRevoked.
	Reason error
}

func (e *HostKeyError) Error() string {
	presented := "no usable key"
	if e.Fingerprint != "" {
		presented = e.KeyType + " key " + e.Fingerprint
	}
	switch e.Reason {
	case ErrUnknownHostKey:
		return fmt.Sprintf("%v for %s: the server presented %s, and %s has no entry for this host; "+
			"verify the key out of band before adding it", e.Reason, e.Host, presented, e.KnownHostsFile)
	case ErrHostKeyRevoked:
		return fmt.Sprintf("%v for %s: the server presented %s, which %s marks @revoked",
			e.Reason, e.Host, presented, e.KnownHostsFile)
	default:
		return fmt.Sprintf("%v for %s: the server presented %s, but %s lists [%s]; "+
			"someone may be intercepting the connection, or the host was reinstalled",
			e.Reason, e.Host, presented, e.KnownHostsFile, strings.Join(e.Known, "; "))
	}
}

// Unwrap returns the Reason sentinel, for errors.Is.
func (e *HostKeyError) Unwrap() error { return e.Reason }

// hostCheck verifies one connection's host key against known_hosts.
type hostCheck struct {
	host     string
	file     string
	insecure bool
	callback ssh.HostKeyCallback
	// known is what known_hosts lists for the host; algorithms the host-key algorithms
	// offered in the handshake, derived from known (nil: x/crypto's defaults).
	known      []knownhosts.KnownKey
	algorithms []string

	verified ssh.PublicKey
	refused  error
}

// newHostCheck reads the known_hosts file and works out which host-key algorithms to
// offer. x/crypto negotiates the server's host-key algorithm without looking at
// known_hosts, so a server with ed25519 and RSA keys could present the RSA one while
// known_hosts lists only its ed25519 key, and the check would fail as "changed"; offering
// only the algorithms of the known keys makes the server present one we can verify.
func newHostCheck(cfg Config, host string, remote net.Addr, probe ssh.PublicKey) (*hostCheck, error) {
	h := &hostCheck{host: host, file: cfg.KnownHostsFile, insecure: cfg.InsecureIgnoreHostKey}
	if h.insecure {
		return h, nil
	}
	cb, err := knownhosts.New(cfg.KnownHostsFile)
	if err != nil {
		return nil, fmt.Errorf("sshx: KnownHostsFile: %w", err)
	}
	h.callback = cb
	// The probe key is random, so it matches nothing and the KeyError lists every key
	// known for the host.
	var keyErr *knownhosts.KeyError
	if errors.As(cb(host, remote, probe), &keyErr) {
		h.known = keyErr.Want
		h.algorithms = algorithmsFor(keyErr.Want)
	}
	return h, nil
}

// check is the ssh.HostKeyCallback of the handshake.
func (h *hostCheck) check(hostname string, remote net.Addr, key ssh.PublicKey) error {
	if h.insecure {
		h.verified = key
		return nil
	}
	err := h.callback(hostname, remote, key)
	if err == nil {
		h.verified = key
		return nil
	}
	h.refused = h.refusal(key, err)
	return h.refused
}

func (h *hostCheck) refusal(key ssh.PublicKey, err error) error {
	e := &HostKeyError{Host: h.host, KnownHostsFile: h.file, Known: describeKnown(h.known)}
	if key != nil {
		e.KeyType, e.Fingerprint = key.Type(), ssh.FingerprintSHA256(key)
	}
	var keyErr *knownhosts.KeyError
	var revoked *knownhosts.RevokedError
	switch {
	case errors.Is(err, errNoKnownKeyType):
		e.Reason = ErrHostKeyChanged
	case errors.As(err, &revoked):
		e.Reason = ErrHostKeyRevoked
	case errors.As(err, &keyErr) && len(keyErr.Want) == 0:
		e.Reason = ErrUnknownHostKey
	case errors.As(err, &keyErr):
		e.Reason = ErrHostKeyChanged
		e.Known = describeKnown(keyErr.Want)
	default:
		return fmt.Errorf("sshx: checking host key of %s: %w", h.host, err)
	}
	return e
}

func describeKnown(keys []knownhosts.KnownKey) []string {
	out := make([]string, 0, len(keys))
	for _, k := range keys {
		out = append(out, fmt.Sprintf("%s:%d: %s %s", k.Filename, k.Line, k.Key.Type(), ssh.FingerprintSHA256(k.Key)))
	}
	return out
}

// hostKeyPreference is the order in which host-key algorithms are offered; certificate
// algorithms are absent because known_hosts host lines hold plain keys.
var hostKeyPreference = []string{
	ssh.KeyAlgoED25519,
	ssh.KeyAlgoECDSA256, ssh.KeyAlgoECDSA384, ssh.KeyAlgoECDSA521,
	ssh.KeyAlgoSKED25519, ssh.KeyAlgoSKECDSA256,
	ssh.KeyAlgoRSASHA512, ssh.KeyAlgoRSASHA256, ssh.KeyAlgoRSA,
}

// algorithmsFor returns the host-key algorithms that can present one of keys, in
// preference order, or nil when none is known (let x/crypto choose).
func algorithmsFor(keys []knownhosts.KnownKey) []string {
	var out []string
	for _, algo := range hostKeyPreference {
		keyType := algo
		if algo == ssh.KeyAlgoRSASHA256 || algo == ssh.KeyAlgoRSASHA512 {
			keyType = ssh.KeyAlgoRSA
		}
		if slices.ContainsFunc(keys, func(k knownhosts.KnownKey) bool { return k.Key.Type() == keyType }) {
			out = append(out, algo)
		}
	}
	return out
}

// checkKnownHostsFile fails when the file cannot be read or parsed, so a misconfigured
// pool fails at start rather than at its first connection.
func checkKnownHostsFile(cfg Config) error {
	if cfg.InsecureIgnoreHostKey {
		return nil
	}
	if _, err := os.Stat(cfg.KnownHostsFile); err != nil {
		return fmt.Errorf("%w: KnownHostsFile: %v", ErrConfig, err)
	}
	if _, err := knownhosts.New(cfg.KnownHostsFile); err != nil {
		return fmt.Errorf("%w: KnownHostsFile: %v", ErrConfig, err)
	}
	return nil
}
