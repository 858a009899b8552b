// Package sshtest runs a real SSH server inside a test process, for the tests of sshx, the
// executor's ssh target and the stager's sftp:// transfers.
//
// The server is built on golang.org/x/crypto/ssh and github.com/pkg/sftp and listens on a
// loopback port. It accepts public-key authentication with a client key it generates,
// runs "exec" requests through /bin/sh -c in the test's process (stdin, stdout, stderr and
// the exit status pass through as with OpenSSH; a "signal" request signals the command's
// process group and a closed session leaves its command running, as sshd does), serves the "sftp" subsystem over the
// local file system, and politely refuses env, pty and shell requests. It does not
// emulate users, chroots or OpenSSH's configuration: a test that needs those runs the real
// sshd with StartOpenSSH.
package sshtest

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// Server is an in-process SSH server on 127.0.0.1. Its exported fields are set by
// NewServer and never change afterwards.
type Server struct {
	// Addr is the host:port the server listens on.
	Addr string
	// Home is the working directory of exec requests and relative SFTP paths.
	Home string
	// ClientKeyFile is an unencrypted OpenSSH ed25519 private key the server accepts.
	ClientKeyFile string
	// ClientSigner is the signer of ClientKeyFile.
	ClientSigner ssh.Signer
	// KnownHostsFile is a known_hosts file naming the initial host key for Addr.
	KnownHostsFile string
	// HostKeyFingerprint is the SHA256 fingerprint of the initial host key.
	HostKeyFingerprint string

	ln         net.Listener
	hostKeys   atomic.Pointer[[]ssh.Signer]
	accepted   atomic.Int64
	execs      atomic.Int64
	keepAlives atomic.Int64
	open       atomic.Int64 // commands running now
	peak       atomic.Int64 // most commands running at once

	mu         sync.Mutex
	authorized map[string]bool
	conns      map[*gateConn]struct{}
	running    map[*session]struct{} // sessions whose command has not exited
	stall      chan struct{}         // non-nil while writes to clients are held back
	closed     bool
	wg         sync.WaitGroup
}

// Option configures NewServer.
type Option func(*options)

type options struct {
	hostKeys   []ssh.Signer
	addr       string
	authorized []ssh.PublicKey
}

// WithHostKey makes the server hold signers as its host keys instead of a generated
// ed25519 key; the client's negotiation picks which one it presents. KnownHostsFile
// lists the first.
func WithHostKey(signers ...ssh.Signer) Option {
	return func(o *options) { o.hostKeys = signers }
}

// WithAddr makes the server listen on addr (for example the Addr of a server the test
// closed, to bring a host back on the same port) instead of 127.0.0.1:0.
func WithAddr(addr string) Option {
	return func(o *options) { o.addr = addr }
}

// WithAuthorizedKey makes the server accept pub in addition to its generated client key.
func WithAuthorizedKey(pub ssh.PublicKey) Option {
	return func(o *options) { o.authorized = append(o.authorized, pub) }
}

// NewServer starts a server and registers its Close with t.Cleanup. It fails the test if
// the server cannot start.
func NewServer(t testing.TB, opts ...Option) *Server {
	t.Helper()
	o := options{addr: "127.0.0.1:0"}
	for _, opt := range opts {
		opt(&o)
	}
	if len(o.hostKeys) == 0 {
		o.hostKeys = []ssh.Signer{NewSigner(t)}
	}
	dir := t.TempDir()
	clientKey := NewKey(t, "ed25519")
	s := &Server{
		Home:         filepath.Join(dir, "home"),
		ClientSigner: SignerFrom(t, clientKey),
		authorized:   map[string]bool{},
		conns:        map[*gateConn]struct{}{},
		running:      map[*session]struct{}{},
	}
	if err := os.Mkdir(s.Home, 0o755); err != nil {
		t.Fatalf("sshtest: %v", err)
	}
	s.hostKeys.Store(&o.hostKeys)
	s.authorize(s.ClientSigner.PublicKey())
	for _, pub := range o.authorized {
		s.authorize(pub)
	}
	ln, err := net.Listen("tcp", o.addr)
	if err != nil {
		t.Fatalf("sshtest: listening on %s: %v", o.addr, err)
	}
	s.ln = ln
	s.Addr = ln.Addr().String()
	s.HostKeyFingerprint = ssh.FingerprintSHA256(o.hostKeys[0].PublicKey())
	s.ClientKeyFile = WritePrivateKey(t, dir, "id_ed25519", clientKey)
	s.KnownHostsFile = WriteKnownHosts(t, dir, s.Addr, o.hostKeys[0].PublicKey())
	s.wg.Add(1)
	go s.acceptLoop()
	t.Cleanup(s.Close)
	return s
}

// SetHostKey makes every connection accepted from now on hold signers as host keys (a
// host whose key changed); KnownHostsFile keeps the old one. It returns the SHA256
// fingerprint of the first new key.
func (s *Server) SetHostKey(signers ...ssh.Signer) string {
	s.hostKeys.Store(&signers)
	return ssh.FingerprintSHA256(signers[0].PublicKey())
}

// Accepted returns how many TCP connections the server has accepted.
func (s *Server) Accepted() int { return int(s.accepted.Load()) }

// Execs returns how many exec requests the server has started.
func (s *Server) Execs() int { return int(s.execs.Load()) }

// KeepAlives returns how many keepalive@openssh.com requests the server has received.
func (s *Server) KeepAlives() int { return int(s.keepAlives.Load()) }

// PeakExecs returns the most exec requests that were running at once, over all
// connections.
func (s *Server) PeakExecs() int { return int(s.peak.Load()) }

// DropConnections closes every open connection, as a network failure would. The
// server keeps listening; commands that were running go on, as under sshd.
func (s *Server) DropConnections() {
	s.mu.Lock()
	conns := make([]*gateConn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
}

// Stall holds back everything the server writes to its clients until Resume, as a
// peer whose network went silent: replies, output and keep-alive answers stop, but the
// TCP connections stay open.
func (s *Server) Stall() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stall == nil {
		s.stall = make(chan struct{})
	}
}

// Resume ends a Stall.
func (s *Server) Resume() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stall != nil {
		close(s.stall)
		s.stall = nil
	}
}

// Close stops listening, closes every connection, kills the commands still running
// (sshd would leave them; a test must not) and waits for the server's goroutines. It is
// idempotent.
func (s *Server) Close() {
	s.mu.Lock()
	already := s.closed
	s.closed = true
	s.mu.Unlock()
	if already {
		return
	}
	s.ln.Close()
	s.Resume()
	s.DropConnections()
	s.killRunning()
	s.wg.Wait()
}

func (s *Server) authorize(pub ssh.PublicKey) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.authorized[string(pub.Marshal())] = true
}

func (s *Server) acceptLoop() {
	defer s.wg.Done()
	for {
		conn, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.accepted.Add(1)
		gc := &gateConn{Conn: conn, srv: s, done: make(chan struct{})}
		if !s.track(gc) {
			conn.Close()
			return
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer s.untrack(gc)
			s.serveConn(gc)
		}()
	}
}

func (s *Server) track(c *gateConn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.conns[c] = struct{}{}
	return true
}

func (s *Server) untrack(c *gateConn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
	c.Close()
}

func (s *Server) config() *ssh.ServerConfig {
	cfg := &ssh.ServerConfig{
		PublicKeyCallback: func(_ ssh.ConnMetadata, key ssh.PublicKey) (*ssh.Permissions, error) {
			s.mu.Lock()
			ok := s.authorized[string(key.Marshal())]
			s.mu.Unlock()
			if !ok {
				return nil, errors.New("sshtest: key not authorized")
			}
			return &ssh.Permissions{}, nil
		},
	}
	for _, k := range *s.hostKeys.Load() {
		cfg.AddHostKey(k)
	}
	return cfg
}

func (s *Server) serveConn(conn *gateConn) {
	sconn, chans, reqs, err := ssh.NewServerConn(conn, s.config())
	if err != nil {
		return
	}
	defer sconn.Close()
	go s.globalRequests(reqs)
	var sessions sync.WaitGroup
	defer sessions.Wait()
	for nc := range chans {
		if nc.ChannelType() != "session" {
			nc.Reject(ssh.UnknownChannelType, "only session channels are served")
			continue
		}
		sessions.Add(1)
		go func() {
			defer sessions.Done()
			s.serveSession(nc)
		}()
	}
}

// globalRequests counts keep-alives and refuses every global request, as OpenSSH does
// for the ones it does not know (a refusal still proves the server alive).
func (s *Server) globalRequests(reqs <-chan *ssh.Request) {
	for req := range reqs {
		if req.Type == "keepalive@openssh.com" {
			s.keepAlives.Add(1)
		}
		if req.WantReply {
			req.Reply(false, nil)
		}
	}
}

// gateConn is a server-side connection whose writes wait while the server is stalled.
type gateConn struct {
	net.Conn
	srv  *Server
	once sync.Once
	done chan struct{}
}

func (c *gateConn) Write(p []byte) (int, error) {
	c.srv.mu.Lock()
	gate := c.srv.stall
	c.srv.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-c.done:
			return 0, net.ErrClosed
		}
	}
	return c.Conn.Write(p)
}

func (c *gateConn) Close() error {
	c.once.Do(func() { close(c.done) })
	return c.Conn.Close()
}

// WriteKnownHosts writes a known_hosts file with one line naming pub for addr into dir
// and returns its path.
func WriteKnownHosts(t testing.TB, dir, addr string, pub ssh.PublicKey) string {
	t.Helper()
	path := filepath.Join(dir, "known_hosts")
	line := knownhosts.Line([]string{addr}, pub) + "\n"
	if err := os.WriteFile(path, []byte(line), 0o644); err != nil {
		t.Fatalf("sshtest: %v", err)
	}
	return path
}
