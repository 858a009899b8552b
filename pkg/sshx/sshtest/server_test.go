package sshtest_test

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/gridwire/gridwire/pkg/sshx/sshtest"
)

// dial connects with bare x/crypto/ssh, so the server is tested apart from sshx.
func dial(t *testing.T, srv *sshtest.Server) *ssh.Client {
	t.Helper()
	cb, err := knownhosts.New(srv.KnownHostsFile)
	if err != nil {
		t.Fatal(err)
	}
	c, err := ssh.Dial("tcp", srv.Addr, &ssh.ClientConfig{
		User: "tester", Auth: []ssh.AuthMethod{ssh.PublicKeys(srv.ClientSigner)}, HostKeyCallback: cb,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func session(t *testing.T, c *ssh.Client) *ssh.Session {
	t.Helper()
	s, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestRefusesEnvPtyShellAndOtherSubsystems(t *testing.T) {
	srv := sshtest.NewServer(t)
	c := dial(t, srv)
	if err := session(t, c).Setenv("LANG", "C"); err == nil {
		t.Error("env request accepted")
	}
	if err := session(t, c).RequestPty("xterm", 24, 80, nil); err == nil {
		t.Error("pty request accepted")
	}
	if err := session(t, c).Shell(); err == nil {
		t.Error("shell request accepted")
	}
	if err := session(t, c).RequestSubsystem("netconf"); err == nil {
		t.Error("netconf subsystem accepted")
	}
	// A refused request leaves the session usable, as with OpenSSH.
	s := session(t, c)
	s.Setenv("LANG", "C")
	out, err := s.Output("echo still here")
	if err != nil || string(out) != "still here\n" {
		t.Errorf("exec after a refused env: %q, %v", out, err)
	}
}

func TestExecStatusAndManySessions(t *testing.T) {
	srv := sshtest.NewServer(t)
	c := dial(t, srv)
	var exit *ssh.ExitError
	if err := session(t, c).Run("exit 42"); !errors.As(err, &exit) || exit.ExitStatus() != 42 {
		t.Errorf("exit 42: %v", err)
	}
	var wg sync.WaitGroup
	for range 30 {
		wg.Go(func() {
			s, err := c.NewSession()
			if err != nil {
				t.Error(err)
				return
			}
			defer s.Close()
			if out, err := s.Output("sleep 0.05; echo ok"); err != nil || strings.TrimSpace(string(out)) != "ok" {
				t.Errorf("concurrent session: %q, %v", out, err)
			}
		})
	}
	wg.Wait()
	if srv.PeakExecs() < 2 {
		t.Errorf("at most %d commands ran at once over one connection", srv.PeakExecs())
	}
	if srv.Accepted() != 1 {
		t.Errorf("%d connections accepted, want 1", srv.Accepted())
	}
}

func TestRejectsUnauthorizedKey(t *testing.T) {
	srv := sshtest.NewServer(t)
	_, err := ssh.Dial("tcp", srv.Addr, &ssh.ClientConfig{
		User: "tester", Auth: []ssh.AuthMethod{ssh.PublicKeys(sshtest.NewSigner(t))},
		HostKeyCallback: ssh.InsecureIgnoreHostKey(), // this test is about client auth only
	})
	if err == nil || !strings.Contains(err.Error(), "unable to authenticate") {
		t.Errorf("dial with a stranger's key: %v", err)
	}
}

// waitFile waits for a file whose one line is finished: the shell creates a file before
// it writes it, so one that exists may still be empty.
func waitFile(t *testing.T, path string) string {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if b, err := os.ReadFile(path); err == nil && len(b) > 0 && b[len(b)-1] == '\n' {
			return string(b)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never appeared", path)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// As under sshd, a session closed (or a connection dropped) while its command runs does
// not kill the command; Close does.
func TestCommandOutlivesItsSessionUntilClose(t *testing.T) {
	srv := sshtest.NewServer(t)
	c := dial(t, srv)
	dir := t.TempDir()
	s := session(t, c)
	if err := s.Start("echo $$ > " + dir + "/pid.tmp && mv " + dir + "/pid.tmp " + dir + "/pid; sleep 0.2; echo survived > " + dir + "/done"); err != nil {
		t.Fatal(err)
	}
	waitFile(t, dir+"/pid")
	s.Close()
	srv.DropConnections()
	if got := waitFile(t, dir+"/done"); got != "survived\n" {
		t.Errorf("done file holds %q", got)
	}

	c = dial(t, srv)
	s = session(t, c)
	if err := s.Start("echo $$ > " + dir + "/pid2.tmp && mv " + dir + "/pid2.tmp " + dir + "/pid2; exec sleep 60"); err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(waitFile(t, dir+"/pid2")))
	if err != nil {
		t.Fatal(err)
	}
	srv.Close()
	if err := syscall.Kill(pid, 0); err == nil {
		t.Errorf("command %d still running after Close", pid)
	}
}
