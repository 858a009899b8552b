package sshx

import (
	"context"
	"errors"
	"fmt"
	"net"

	"golang.org/x/crypto/ssh"
)

// dial connects to addr, verifies its host key, authenticates and starts the
// connection's keep-alive and watcher goroutines.
func (p *Pool) dial(ctx context.Context, addr string) (*Client, error) {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.DialTimeout)
	defer cancel()
	conn, check, err := p.connect(ctx, addr)
	if err != nil {
		return nil, err
	}
	auth, closeAgent, err := p.authMethod()
	if err != nil {
		conn.Close()
		return nil, err
	}
	defer closeAgent()
	cfg := &ssh.ClientConfig{
		User:              p.cfg.User,
		Auth:              []ssh.AuthMethod{auth},
		HostKeyCallback:   check.check,
		HostKeyAlgorithms: check.algorithms,
		Timeout:           p.cfg.DialTimeout,
	}
	sc, chans, reqs, err := handshake(ctx, conn, addr, cfg)
	if err != nil {
		return nil, p.handshakeError(ctx, addr, check, err)
	}
	if p.cfg.InsecureIgnoreHostKey {
		p.logger.Warn("sshx: host key NOT verified (InsecureIgnoreHostKey)", "host", addr,
			"fingerprint", ssh.FingerprintSHA256(check.verified))
	}
	return p.newClient(addr, ssh.NewClient(sc, chans, reqs), ssh.FingerprintSHA256(check.verified))
}

// connect opens the TCP connection and reads known_hosts for it.
func (p *Pool) connect(ctx context.Context, addr string) (net.Conn, *hostCheck, error) {
	dial := (&net.Dialer{}).DialContext
	if p.cfg.Dial != nil {
		dial = p.cfg.Dial
	}
	conn, err := dial(ctx, "tcp", addr)
	if err != nil {
		return nil, nil, fmt.Errorf("sshx: connecting to %s: %w", addr, err)
	}
	check, err := newHostCheck(p.cfg, addr, conn.RemoteAddr(), p.probe)
	if err != nil {
		conn.Close()
		return nil, nil, err
	}
	return conn, check, nil
}

// handshake runs the SSH handshake on conn, aborted by ctx.
func handshake(ctx context.Context, conn net.Conn, addr string, cfg *ssh.ClientConfig) (ssh.Conn, <-chan ssh.NewChannel, <-chan *ssh.Request, error) {
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	sc, chans, reqs, err := ssh.NewClientConn(conn, addr, cfg)
	if !stop() {
		if err == nil {
			sc.Close()
		}
		return nil, nil, nil, ctx.Err()
	}
	if err != nil {
		conn.Close()
		return nil, nil, nil, err
	}
	return sc, chans, reqs, nil
}

// handshakeError turns a failed handshake into the error callers see. When the server
// cannot present any key type known_hosts lists for it, its key has changed as surely as
// when it presents a different key of a known type: a second handshake offering every
// algorithm finds out which key it has now, for the message.
func (p *Pool) handshakeError(ctx context.Context, addr string, check *hostCheck, err error) error {
	if check.refused != nil {
		return check.refused
	}
	var neg *ssh.AlgorithmNegotiationError
	if errors.As(err, &neg) && neg.What == "host key" && check.algorithms != nil {
		return check.refusal(p.presentedKey(ctx, addr), errNoKnownKeyType)
	}
	if ctx.Err() != nil {
		return fmt.Errorf("sshx: connecting to %s: %w", addr, ctx.Err())
	}
	return fmt.Errorf("sshx: connecting to %s: %w", addr, err)
}

// presentedKey returns the host key addr presents when offered any algorithm, or nil.
func (p *Pool) presentedKey(ctx context.Context, addr string) ssh.PublicKey {
	dial := (&net.Dialer{}).DialContext
	if p.cfg.Dial != nil {
		dial = p.cfg.Dial
	}
	conn, err := dial(ctx, "tcp", addr)
	if err != nil {
		return nil
	}
	var key ssh.PublicKey
	errSeen := errors.New("sshx: key seen")
	cfg := &ssh.ClientConfig{
		User: p.cfg.User,
		HostKeyCallback: func(_ string, _ net.Addr, k ssh.PublicKey) error {
			key = k
			return errSeen
		},
	}
	handshake(ctx, conn, addr, cfg)
	return key
}
