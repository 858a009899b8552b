package sshtest

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"

	"github.com/pkg/sftp"
	"golang.org/x/crypto/ssh"
)

// session is one session channel: at most one exec or sftp subsystem runs on it.
type session struct {
	srv *Server
	ch  ssh.Channel

	mu      sync.Mutex
	started bool
	proc    *os.Process
	pipes   execPipes
	exited  bool
	done    sync.WaitGroup
}

func (s *Server) serveSession(nc ssh.NewChannel) {
	ch, reqs, err := nc.Accept()
	if err != nil {
		return
	}
	sess := &session{srv: s, ch: ch}
	for req := range reqs {
		ok, then := sess.handle(req)
		if req.WantReply {
			req.Reply(ok, nil)
		}
		// What the request started may finish and close the channel at once; the reply
		// must go out first, or the client sees the close before its answer (as OpenSSH
		// never does).
		if then != nil {
			then()
		}
	}
	// The client closed the channel, or the connection died. As with sshd, a command
	// still running is not killed: it loses its stdout and stderr (writes fail) and runs
	// on; Server.Close kills it.
	sess.done.Wait()
	ch.Close()
}

// handle answers one channel request; then, if not nil, runs after the reply is sent.
func (sess *session) handle(req *ssh.Request) (ok bool, then func()) {
	switch req.Type {
	case "exec":
		var msg struct{ Command string }
		if ssh.Unmarshal(req.Payload, &msg) != nil || !sess.claim() {
			return false, nil
		}
		return sess.startExec(msg.Command)
	case "subsystem":
		var msg struct{ Name string }
		if ssh.Unmarshal(req.Payload, &msg) != nil || msg.Name != "sftp" || !sess.claim() {
			return false, nil
		}
		return true, sess.startSFTP
	case "signal":
		var msg struct{ Signal string }
		if ssh.Unmarshal(req.Payload, &msg) != nil {
			return false, nil
		}
		sig, ok := signals[ssh.Signal(msg.Signal)]
		if ok {
			sess.kill(sig)
		}
		return ok, nil
	default:
		// env, pty-req, shell, x11-req, auth-agent-req...: refused, as a locked-down sshd
		// refuses them; the client is expected to cope.
		return false, nil
	}
}

var signals = map[ssh.Signal]syscall.Signal{
	ssh.SIGKILL: syscall.SIGKILL,
	ssh.SIGTERM: syscall.SIGTERM,
	ssh.SIGINT:  syscall.SIGINT,
	ssh.SIGHUP:  syscall.SIGHUP,
	ssh.SIGQUIT: syscall.SIGQUIT,
	ssh.SIGUSR1: syscall.SIGUSR1,
	ssh.SIGUSR2: syscall.SIGUSR2,
}

func (sess *session) claim() bool {
	sess.mu.Lock()
	defer sess.mu.Unlock()
	if sess.started {
		return false
	}
	sess.started = true
	return true
}

// execPipes are a command's standard streams, seen from the server.
type execPipes struct {
	stdin          io.WriteCloser
	stdout, stderr io.ReadCloser
}

// startExec starts command in its own process group (as sshd's session child is); the
// returned func streams its standard streams and reports its exit.
func (sess *session) startExec(command string) (bool, func()) {
	cmd := exec.Command("/bin/sh", "-c", command)
	cmd.Dir = sess.srv.Home
	cmd.Env = append(os.Environ(), "HOME="+sess.srv.Home)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var p execPipes
	var err1, err2, err3 error
	p.stdin, err1 = cmd.StdinPipe()
	p.stdout, err2 = cmd.StdoutPipe()
	p.stderr, err3 = cmd.StderrPipe()
	if errors.Join(err1, err2, err3) != nil {
		return false, nil
	}
	sess.mu.Lock()
	defer sess.mu.Unlock()
	if err := cmd.Start(); err != nil {
		return false, nil
	}
	sess.proc = cmd.Process
	sess.pipes = p
	sess.srv.execs.Add(1)
	sess.srv.execStarted(sess)
	sess.done.Add(1)
	return true, func() { go sess.finishExec(cmd, p) }
}

func (sess *session) finishExec(cmd *exec.Cmd, p execPipes) {
	defer sess.done.Done()
	go func() {
		io.Copy(p.stdin, sess.ch)
		p.stdin.Close()
	}()
	// Once the channel cannot take output, the read ends close, so the command's
	// writes fail (EPIPE) as they do under sshd instead of filling the pipe and blocking.
	var copies sync.WaitGroup
	for _, c := range []struct {
		w io.Writer
		r io.ReadCloser
	}{{sess.ch, p.stdout}, {sess.ch.Stderr(), p.stderr}} {
		copies.Go(func() {
			io.Copy(c.w, c.r)
			c.r.Close()
		})
	}
	copies.Wait()
	err := cmd.Wait()
	sess.srv.execEnded(sess) // before the exit status goes out, so the count never lags
	sess.mu.Lock()
	sess.exited = true
	sess.mu.Unlock()
	sess.ch.CloseWrite()
	sendExit(sess.ch, cmd.ProcessState, err)
	sess.ch.Close()
}

func sendExit(ch ssh.Channel, st *os.ProcessState, waitErr error) {
	var exitErr *exec.ExitError
	if waitErr != nil && !errors.As(waitErr, &exitErr) {
		return
	}
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		name := signalName(ws.Signal())
		ch.SendRequest("exit-signal", false, ssh.Marshal(struct {
			Signal     string
			CoreDumped bool
			Error      string
			Lang       string
		}{Signal: name}))
		return
	}
	ch.SendRequest("exit-status", false, ssh.Marshal(struct{ Status uint32 }{uint32(st.ExitCode())}))
}

func signalName(sig syscall.Signal) string {
	for name, s := range signals {
		if s == sig {
			return string(name)
		}
	}
	return "KILL"
}

func (sess *session) startSFTP() {
	sess.done.Add(1)
	go func() {
		defer sess.done.Done()
		srv, err := sftp.NewServer(sess.ch, sftp.WithServerWorkingDirectory(sess.srv.Home))
		if err == nil {
			srv.Serve()
			srv.Close()
		}
		sess.ch.Close()
	}()
}

// kill signals the process group of the running command, if any.
func (sess *session) kill(sig syscall.Signal) {
	sess.mu.Lock()
	defer sess.mu.Unlock()
	if sess.proc != nil && !sess.exited {
		syscall.Kill(-sess.proc.Pid, sig)
	}
}

func (s *Server) execStarted(sess *session) {
	s.mu.Lock()
	s.running[sess] = struct{}{}
	s.mu.Unlock()
	n := s.open.Add(1)
	for {
		peak := s.peak.Load()
		if n <= peak || s.peak.CompareAndSwap(peak, n) {
			return
		}
	}
}

func (s *Server) execEnded(sess *session) {
	s.mu.Lock()
	delete(s.running, sess)
	s.mu.Unlock()
	s.open.Add(-1)
}

// killRunning kills every command still running, for Close.
func (s *Server) killRunning() {
	s.mu.Lock()
	running := make([]*session, 0, len(s.running))
	for sess := range s.running {
		running = append(running, sess)
	}
	s.mu.Unlock()
	for _, sess := range running {
		sess.kill(syscall.SIGKILL)
		// A descendant that left the process group may still hold the output pipes.
		sess.pipes.stdout.Close()
		sess.pipes.stderr.Close()
	}
}
