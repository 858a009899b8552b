package sshtest

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gridwire/gridwire/pkg/proctest"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// OpenSSH is a real OpenSSH sshd on a loopback port, started for one test by
// StartOpenSSH, with key-only login and its own config, host keys and authorized_keys.
type OpenSSH struct {
	// Addr is the host:port sshd listens on.
	Addr string
	// User is the login: the install script's test user (GW_SSH_TEST_USER, default
	// gwtest, with /bin/sh as shell) when the test runs as root, else the invoking user.
	User string
	// Dir is a scratch directory User owns, removed at cleanup.
	Dir string
	// ClientKeyFile is an unencrypted ed25519 key sshd accepts for User.
	ClientKeyFile string
	// KnownHostsFile lists sshd's ed25519 host key for Addr.
	KnownHostsFile string
	// HostKeyFiles maps "ed25519", "ecdsa" and "rsa" to sshd's public host key files.
	HostKeyFiles map[string]string
	// LogFile receives sshd's log (-e).
	LogFile string
}

// StartOpenSSH prepares the machine with scripts/install-openssh.sh (found by walking
// up from the working directory to go.work), then runs /usr/sbin/sshd -D on a free
// loopback port until the test ends. Lines of config (e.g. "MaxSessions 2") go before
// the defaults, so they win (sshd keeps a keyword's first value). It fails the test when
// sshd cannot be prepared.
func StartOpenSSH(t testing.TB, config ...string) *OpenSSH {
	t.Helper()
	installOpenSSH(t)
	root, err := os.MkdirTemp("", "sshtest-openssh-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		proctest.KillSessionsNaming(root)
		os.RemoveAll(root)
	})
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	s := &OpenSSH{User: openSSHUser(t), HostKeyFiles: map[string]string{}, LogFile: filepath.Join(root, "sshd.log")}
	s.Dir = filepath.Join(root, "work")
	if err := os.Mkdir(s.Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	chownTo(t, s.Dir, s.User)
	for _, kind := range []string{"ed25519", "ecdsa", "rsa"} {
		path := filepath.Join(root, "host_"+kind)
		keygen(t, "-t", kind, "-N", "", "-q", "-f", path)
		s.HostKeyFiles[kind] = path + ".pub"
	}
	s.ClientKeyFile = filepath.Join(root, "id_ed25519")
	keygen(t, "-t", "ed25519", "-N", "", "-q", "-f", s.ClientKeyFile)
	pub, err := os.ReadFile(s.ClientKeyFile + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	authorized := filepath.Join(root, "authorized_keys")
	if err := os.WriteFile(authorized, pub, 0o644); err != nil {
		t.Fatal(err)
	}
	s.start(t, root, authorized, config)
	s.KnownHostsFile = s.KnownHosts(t, filepath.Join(root, "known_hosts"), "ed25519")
	return s
}

// KnownHosts writes to path a known_hosts file listing only sshd's host key of the
// given kind and returns path.
func (s *OpenSSH) KnownHosts(t testing.TB, path, kind string) string {
	t.Helper()
	if err := os.WriteFile(path, []byte(knownhosts.Line([]string{s.Addr}, s.HostKey(t, kind))+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// HostKey returns sshd's public host key of the given kind.
func (s *OpenSSH) HostKey(t testing.TB, kind string) ssh.PublicKey {
	t.Helper()
	b, err := os.ReadFile(s.HostKeyFiles[kind])
	if err != nil {
		t.Fatal(err)
	}
	pub, _, _, _, err := ssh.ParseAuthorizedKey(b)
	if err != nil {
		t.Fatal(err)
	}
	return pub
}

// SSHArgs are OpenSSH client options (for ssh and scp) that log in to sshd as User with
// ClientKeyFile, checking KnownHostsFile strictly; the host to name is 127.0.0.1.
func (s *OpenSSH) SSHArgs() []string {
	_, port, _ := net.SplitHostPort(s.Addr)
	return []string{"-i", s.ClientKeyFile, "-o", "UserKnownHostsFile=" + s.KnownHostsFile,
		"-o", "StrictHostKeyChecking=yes", "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes",
		"-o", "Port=" + port, "-o", "User=" + s.User}
}

// ControlMaster starts an OpenSSH ControlMaster connection to sshd for the rest of the
// test and returns the ssh arguments that run a command over it, up to the command:
// exec.Command("ssh", append(args, "true")...). It is the baseline OpenSSH offers for
// many commands to one host.
func (s *OpenSSH) ControlMaster(t testing.TB) []string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "cm")
	args := append(s.SSHArgs(), "-S", sock)
	master := exec.Command("ssh", append(args, "-M", "-N", "127.0.0.1")...)
	if err := master.Start(); err != nil {
		t.Fatalf("sshtest: starting ssh -M: %v", err)
	}
	t.Cleanup(func() {
		master.Process.Kill()
		master.Wait()
	})
	deadline := time.Now().Add(10 * time.Second)
	for exec.Command("ssh", append(args, "-O", "check", "127.0.0.1")...).Run() != nil {
		if time.Now().After(deadline) {
			t.Fatal("sshtest: the ControlMaster connection did not come up")
		}
		time.Sleep(20 * time.Millisecond)
	}
	return append(args, "127.0.0.1")
}

func installOpenSSH(t testing.TB) {
	t.Helper()
	script, err := repoFile("scripts/install-openssh.sh")
	if err != nil {
		t.Fatalf("sshtest: %v", err)
	}
	if out, err := exec.Command("bash", script).CombinedOutput(); err != nil {
		t.Fatalf("sshtest: %s: %v\n%s", script, err, out)
	}
}

// repoFile finds rel under the directory holding go.work, above the working directory.
func repoFile(rel string) (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return filepath.Join(dir, rel), nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.work above the working directory")
		}
		dir = parent
	}
}

func openSSHUser(t testing.TB) string {
	if os.Geteuid() == 0 {
		if name := os.Getenv("GW_SSH_TEST_USER"); name != "" {
			return name
		}
		return "gwtest"
	}
	u, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	return u.Username
}

// Own gives path to the login user (when the test runs as root), for a directory the
// user's jobs must write in that is not under Dir.
func (s *OpenSSH) Own(t testing.TB, path string) { chownTo(t, path, s.User) }

func chownTo(t testing.TB, path, name string) {
	t.Helper()
	if os.Geteuid() != 0 {
		return
	}
	u, err := user.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if err := os.Chown(path, uid, gid); err != nil {
		t.Fatal(err)
	}
}

func keygen(t testing.TB, args ...string) {
	t.Helper()
	if out, err := exec.Command("ssh-keygen", args...).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen %v: %v\n%s", args, err, out)
	}
}

// start runs sshd on a free port (retrying if another process takes the port first)
// and waits until it accepts connections.
func (s *OpenSSH) start(t testing.TB, root, authorized string, extra []string) {
	t.Helper()
	conf := filepath.Join(root, "sshd_config")
	for attempt := 1; ; attempt++ {
		port := freePort(t)
		config := strings.Join(extra, "\n") + "\n" + sshdConfig(port, root, authorized)
		if err := os.WriteFile(conf, []byte(config), 0o644); err != nil {
			t.Fatal(err)
		}
		logFile, err := os.Create(s.LogFile)
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("/usr/sbin/sshd", "-D", "-e", "-f", conf)
		cmd.Stdout, cmd.Stderr = logFile, logFile
		if err := cmd.Start(); err != nil {
			t.Fatalf("sshtest: starting sshd: %v", err)
		}
		exited := make(chan struct{})
		go func() {
			cmd.Wait()
			logFile.Close()
			close(exited)
		}()
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		if waitListening(addr, exited) {
			s.Addr = addr
			t.Cleanup(func() {
				cmd.Process.Signal(syscall.SIGTERM)
				<-exited
			})
			return
		}
		cmd.Process.Kill()
		<-exited
		if attempt == 3 {
			log, _ := os.ReadFile(s.LogFile)
			t.Fatalf("sshtest: sshd did not start:\n%s", log)
		}
	}
}

func sshdConfig(port int, root, authorized string) string {
	return fmt.Sprintf(`Port %d
ListenAddress 127.0.0.1
HostKey %[2]s/host_ed25519
HostKey %[2]s/host_ecdsa
HostKey %[2]s/host_rsa
PidFile %[2]s/sshd.pid
AuthorizedKeysFile %[3]s
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
UsePAM no
StrictModes no
MaxStartups 200
MaxSessions 64
Subsystem sftp internal-sftp
`, port, root, authorized)
}

func freePort(t testing.TB) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// waitListening reports whether addr accepts a connection before sshd exits.
func waitListening(addr string, exited <-chan struct{}) bool {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return false
		default:
		}
		if conn, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			conn.Close()
			return true
		}
		time.Sleep(10 * time.Millisecond)
	}
	return false
}
