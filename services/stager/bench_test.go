package stager

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/pkg/sshx/sshtest"
)

// sshd is a real OpenSSH server on a loopback port, for comparing with scp.
type sshd struct {
	addr, port, key, knownHosts string
}

// startSSHD runs /usr/sbin/sshd for the current user on a free loopback port.
func startSSHD(b *testing.B) sshd {
	b.Helper()
	if _, err := os.Stat("/usr/sbin/sshd"); err != nil {
		b.Skip("OpenSSH server not installed (apt-get install openssh-server)")
	}
	dir := b.TempDir()
	run := func(name string, args ...string) {
		if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
			b.Fatalf("%s %v: %v\n%s", name, args, err, out)
		}
	}
	run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", filepath.Join(dir, "hostkey"))
	run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", filepath.Join(dir, "id"))
	pub, _ := os.ReadFile(filepath.Join(dir, "id.pub"))
	hostPub, _ := os.ReadFile(filepath.Join(dir, "hostkey.pub"))
	port := freePort(b)
	s := sshd{addr: "127.0.0.1:" + port, port: port, key: filepath.Join(dir, "id"), knownHosts: filepath.Join(dir, "known_hosts")}
	writeFileB(b, filepath.Join(dir, "authorized_keys"), string(pub))
	writeFileB(b, s.knownHosts, "[127.0.0.1]:"+port+" "+string(hostPub))
	writeFileB(b, filepath.Join(dir, "sshd_config"), fmt.Sprintf(`Port %[2]s
ListenAddress 127.0.0.1
HostKey %[1]s/hostkey
PidFile %[1]s/sshd.pid
AuthorizedKeysFile %[1]s/authorized_keys
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
UsePAM no
StrictModes no
Subsystem sftp internal-sftp
`, dir, port))
	_ = os.MkdirAll("/run/sshd", 0o755)
	cmd := exec.Command("/usr/sbin/sshd", "-D", "-e", "-f", filepath.Join(dir, "sshd_config"))
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	for i := 0; i < 100; i++ {
		if exec.Command("ssh", s.sshArgs("true")...).Run() == nil {
			return s
		}
		time.Sleep(50 * time.Millisecond)
	}
	b.Fatal("sshd did not come up")
	return s
}

func (s sshd) opts() []string {
	return []string{"-o", "BatchMode=yes", "-o", "UserKnownHostsFile=" + s.knownHosts, "-o", "StrictHostKeyChecking=yes", "-i", s.key}
}

func (s sshd) sshArgs(cmd string) []string {
	return append(s.opts(), "-p", s.port, "root@127.0.0.1", cmd)
}

func writeFileB(b *testing.B, p, content string) {
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		b.Fatal(err)
	}
}

func bigFile(b *testing.B, p string, size int64) {
	f, err := os.Create(p)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := io.CopyN(f, rand.Reader, size); err != nil {
		b.Fatal(err)
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkLargeFile moves one file (1 GiB unless STAGER_BENCH_BYTES says otherwise)
// over loopback with a real OpenSSH server: the stager's SFTP path (what stage-in and
// stage-out run, SHA-256 included) and OpenSSH's scp, in pairs, one right after the
// other, so both see the same load on a shared machine. It reports both rates and their
// ratio (stager / scp, the mean over the pairs).
func BenchmarkLargeFile(b *testing.B) {
	size := int64(1 << 30)
	if v := os.Getenv("STAGER_BENCH_BYTES"); v != "" {
		fmt.Sscan(v, &size)
	}
	srv := startSSHD(b)
	dir := b.TempDir()
	src := filepath.Join(dir, "src.bin")
	bigFile(b, src, size)
	s, err := newStager(context.Background(), Config{SSH: SSHConfig{User: "root", Identity: srv.key, KnownHosts: srv.knownHosts}}.withDefaults(),
		Deps{Now: time.Now})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	wd := openLocalDir(dir)
	defer wd.Close()
	stager := func(b *testing.B, remotePath string, down bool) time.Duration {
		r, err := resolveRemote("sftp://"+srv.addr+remotePath, "", nil)
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		ep, name, err := s.remoteEndpoint(ctx, r, scope{})
		if err == nil && down {
			_, err = s.copier().copyItem(ctx, ep, name, wd, "got.bin", false)
		} else if err == nil {
			_, err = s.copier().copyItem(ctx, wd, "src.bin", ep, name, false)
		}
		if err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	scp := func(b *testing.B, from, to string) time.Duration {
		start := time.Now()
		args := append(srv.opts(), "-q", "-P", srv.port, from, to)
		if out, err := exec.Command("scp", args...).CombinedOutput(); err != nil {
			b.Fatalf("scp: %v\n%s", err, out)
		}
		return time.Since(start)
	}
	remote := "root@127.0.0.1:"
	pairs := map[string]func(b *testing.B) (time.Duration, time.Duration){
		"download": func(b *testing.B) (time.Duration, time.Duration) {
			return stager(b, src, true), scp(b, remote+src, filepath.Join(dir, "scp-got.bin"))
		},
		"upload": func(b *testing.B) (time.Duration, time.Duration) {
			return stager(b, filepath.Join(dir, "up.bin"), false), scp(b, src, remote+filepath.Join(dir, "scp-up.bin"))
		},
	}
	for _, name := range []string{"download", "upload"} {
		b.Run(name, func(b *testing.B) {
			var ours, theirs time.Duration
			ratio := 0.0
			for b.Loop() {
				o, t := pairs[name](b)
				ours, theirs, ratio = ours+o, theirs+t, ratio+t.Seconds()/o.Seconds()
			}
			mb := float64(size*int64(b.N)) / 1e6
			b.ReportMetric(mb/ours.Seconds(), "stager-MB/s")
			b.ReportMetric(mb/theirs.Seconds(), "scp-MB/s")
			b.ReportMetric(ratio/float64(b.N), "stager/scp")
		})
	}
}

// BenchmarkSmallFiles measures files per second: a directory of 1 KiB files over SFTP
// (one transfer), and a job naming each file separately (one recorded attempt each,
// through the whole service: consumer, transfers, JetStream appends).
func BenchmarkSmallFiles(b *testing.B) {
	const n = 500
	b.Run("sftp-directory", func(b *testing.B) {
		srv := sshtest.NewServer(b)
		src := filepath.Join(srv.Home, "many")
		for i := range n {
			writeFileB2(b, filepath.Join(src, fmt.Sprintf("f%04d", i)), strings.Repeat("x", 1024))
		}
		s, _ := newStager(context.Background(), Config{SSH: SSHConfig{User: "u", Identity: srv.ClientKeyFile, KnownHosts: srv.KnownHostsFile}}.withDefaults(), Deps{Now: time.Now})
		defer s.Close()
		r, _ := resolveRemote("sftp://"+srv.Addr+src+"/", "", nil)
		wd := openLocalDir(b.TempDir())
		defer wd.Close()
		c := s.copier()
		for b.Loop() {
			ep, name, err := s.remoteEndpoint(context.Background(), r, scope{})
			if err != nil {
				b.Fatal(err)
			}
			if res, err := c.copyItem(context.Background(), ep, name, wd, "many", true); err != nil || res.files != n {
				b.Fatal(res, err)
			}
		}
		b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "files/s")
	})
	b.Run("job-file-entries", func(b *testing.B) {
		src := b.TempDir()
		var copies []events.FileCopy
		for i := range n {
			writeFileB2(b, filepath.Join(src, fmt.Sprintf("f%04d", i)), strings.Repeat("x", 1024))
			copies = append(copies, events.FileCopy{From: fmt.Sprintf("f%04d", i), To: fmt.Sprintf("in/f%04d", i)})
		}
		e := newEnv(b)
		e.start(Config{Parallel: 8})
		for b.Loop() {
			id := e.incarnate(events.Job{DefaultStorageBase: "file://" + src, StageIn: copies}, "local", "")
			e.waitStatus(id, events.StatusQueued)
		}
		b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "files/s")
	})
}

func writeFileB2(b *testing.B, p, content string) {
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		b.Fatal(err)
	}
	writeFileB(b, p, content)
}

func freePort(b *testing.B) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return port
}
