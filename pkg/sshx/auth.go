package sshx

import (
	"errors"
	"fmt"
	"net"
	"os"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
)

// ErrEncryptedKey marks an identity file protected by a passphrase; sshx never prompts.
var ErrEncryptedKey = errors.New("sshx: encrypted private key (load it into ssh-agent instead)")

// loadIdentities parses every identity file into a signer.
func loadIdentities(files []string) ([]ssh.Signer, error) {
	signers := make([]ssh.Signer, 0, len(files))
	for _, f := range files {
		s, err := loadIdentity(f)
		if err != nil {
			return nil, err
		}
		signers = append(signers, s)
	}
	return signers, nil
}

func loadIdentity(path string) (ssh.Signer, error) {
	pemBytes, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("sshx: IdentityFiles: %w", err)
	}
	signer, err := ssh.ParsePrivateKey(pemBytes)
	var missing *ssh.PassphraseMissingError
	if errors.As(err, &missing) {
		return nil, fmt.Errorf("%s: IdentityFiles: %w", path, ErrEncryptedKey)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: IdentityFiles: not a private key: %v", path, err)
	}
	return signer, nil
}

// authMethod offers the key-file signers first, then the agent's. The agent connection
// is opened per handshake (an agent may restart between connections) and returned so the
// caller closes it once the handshake is over.
func (p *Pool) authMethod() (ssh.AuthMethod, func(), error) {
	signers := p.signers
	closeAgent := func() {}
	if p.cfg.UseAgent {
		fromAgent, closeFn, err := agentSigners()
		if err != nil && len(signers) == 0 {
			return nil, nil, err
		}
		if err == nil {
			signers = append(signers[:len(signers):len(signers)], fromAgent...)
			closeAgent = closeFn
		}
	}
	if len(signers) == 0 {
		closeAgent()
		return nil, nil, errors.New("sshx: no keys to authenticate with (identity files empty, ssh-agent has none)")
	}
	return ssh.PublicKeys(signers...), closeAgent, nil
}

// agentSigners lists the keys of the ssh-agent at $SSH_AUTH_SOCK; they sign through the
// agent connection until the returned func closes it.
func agentSigners() ([]ssh.Signer, func(), error) {
	sock := os.Getenv("SSH_AUTH_SOCK")
	if sock == "" {
		return nil, nil, errors.New("sshx: UseAgent: SSH_AUTH_SOCK is not set")
	}
	conn, err := net.Dial("unix", sock)
	if err != nil {
		return nil, nil, fmt.Errorf("sshx: connecting to ssh-agent at %s: %w", sock, err)
	}
	signers, err := agent.NewClient(conn).Signers()
	if err != nil {
		conn.Close()
		return nil, nil, fmt.Errorf("sshx: listing ssh-agent keys: %w", err)
	}
	return signers, func() { conn.Close() }, nil
}
