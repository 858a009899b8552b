package sshtest_test

import (
	"errors"
	"strings"
	"sync"
	"testing"

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
