//go:build e2e

package sshx_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/gridwire/gridwire/pkg/shellquote"
	"github.com/gridwire/gridwire/pkg/sshx"
	"github.com/gridwire/gridwire/pkg/sshx/sshtest"
)

// sshd wraps sshtest.OpenSSH with this package's test helpers.
type sshd struct{ *sshtest.OpenSSH }

func startSSHD(t testing.TB, config ...string) sshd { return sshd{sshtest.StartOpenSSH(t, config...)} }

func (s sshd) fingerprint(t testing.TB, kind string) string {
	return ssh.FingerprintSHA256(s.HostKey(t, kind))
}

func (s sshd) pool(t testing.TB, edit ...func(*sshx.Config)) *sshx.Pool {
	t.Helper()
	cfg := sshx.Config{User: s.User, IdentityFiles: []string{s.ClientKeyFile}, KnownHostsFile: s.KnownHostsFile}
	for _, e := range edit {
		e(&cfg)
	}
	pool, err := sshx.NewPool(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pool.Close() })
	return pool
}

func TestOpenSSH(t *testing.T) {
	s := startSSHD(t)
	pool := s.pool(t)
	c := client(t, pool, s.Addr)
	if c.HostKeyFingerprint() != s.fingerprint(t, "ed25519") {
		t.Errorf("verified %s, want the ed25519 key", c.HostKeyFingerprint())
	}

	t.Run("commands", func(t *testing.T) {
		res := run(t, c, "echo out; echo err >&2; id -un; exit 7")
		want := "out\n" + s.User + "\n"
		if string(res.Stdout) != want || string(res.Stderr) != "err\n" || res.ExitCode != 7 {
			t.Errorf("got stdout %q stderr %q exit %d; want %q, \"err\\n\", 7", res.Stdout, res.Stderr, res.ExitCode, want)
		}
		in := make([]byte, 1<<20)
		rand.Read(in)
		res, err := c.Run(testCtx(t), "cat", bytes.NewReader(in))
		if err != nil || !bytes.Equal(res.Stdout, in) {
			t.Errorf("stdin round trip: %d bytes back, err %v", len(res.Stdout), err)
		}
	})

	t.Run("concurrent", func(t *testing.T) {
		var wg sync.WaitGroup
		for i := range 40 {
			wg.Go(func() {
				res, err := c.Run(testCtx(t), fmt.Sprintf("echo %d", i), nil)
				if err != nil || strings.TrimSpace(string(res.Stdout)) != strconv.Itoa(i) {
					t.Errorf("run %d: %q, %v", i, res.Stdout, err)
				}
			})
		}
		wg.Wait()
	})

	t.Run("cancel", func(t *testing.T) {
		pidFile := filepath.Join(s.Dir, "sleep.pid")
		ctx, cancel := context.WithCancel(testCtx(t))
		done := make(chan error, 1)
		go func() {
			_, err := c.Run(ctx, "echo $$ > "+pidFile+".tmp && mv "+pidFile+".tmp "+pidFile+" && exec sleep 60", nil)
			done <- err
		}()
		pid := waitForPID(t, pidFile)
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("Run after cancel: %v", err)
		}
		for syscall.Kill(pid, 0) == nil {
			select {
			case <-testCtx(t).Done():
				t.Fatalf("sleep %d survived the cancel", pid)
			case <-time.After(10 * time.Millisecond):
			}
		}
	})

	t.Run("sftp", func(t *testing.T) {
		ctx := testCtx(t)
		dir := filepath.Join(s.Dir, "a/b")
		if err := c.MkdirAll(ctx, dir); err != nil {
			t.Fatal(err)
		}
		for name, size := range map[string]int{"8MiB": 8<<20 + 7, "empty": 0} {
			data := make([]byte, size)
			rand.Read(data)
			remote := filepath.Join(dir, name)
			if n, err := c.Upload(ctx, io.MultiReader(bytes.NewReader(data)), remote, 0o640); err != nil || n != int64(size) {
				t.Fatalf("Upload %s = %d, %v", name, n, err)
			}
			h := sha256.New()
			if n, err := c.Download(ctx, remote, h); err != nil || n != int64(size) {
				t.Fatalf("Download %s = %d, %v", name, n, err)
			}
			if want := sha256.Sum256(data); !bytes.Equal(h.Sum(nil), want[:]) {
				t.Errorf("%s: SHA-256 differs after the round trip", name)
			}
			if st, err := os.Stat(remote); err != nil || st.Mode().Perm() != 0o640 {
				t.Errorf("%s: %v, %v; want mode 0640", name, st, err)
			}
		}
	})

	if got := run(t, c, "true"); got.ExitCode != 0 {
		t.Fatal("connection unusable after the subtests")
	}
}

// A remote forward carries connections made on the host's loopback back to a service
// here (ssh -R), as tasks on SSH hosts reach the gateway; a second call returns the
// same address, and the connection that replaces a lost one asks for the same port.
func TestOpenSSHForward(t *testing.T) {
	s := startSSHD(t)
	pool := s.pool(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "here %s", r.URL.Path)
	}))
	t.Cleanup(srv.Close)
	dial := func(ctx context.Context) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", srv.Listener.Addr().String())
	}
	c := client(t, pool, s.Addr)
	addr, err := c.Forward(testCtx(t), dial)
	if err != nil {
		t.Fatal(err)
	}
	if again, err := c.Forward(testCtx(t), dial); err != nil || again != addr {
		t.Fatalf("a second Forward: %q, %v; want %q", again, err, addr)
	}
	if !strings.HasPrefix(addr, "127.0.0.1:") || addr == srv.Listener.Addr().String() {
		t.Fatalf("forwarded to %q", addr)
	}
	get := "exec 3<>/dev/tcp/127.0.0.1/" + strings.TrimPrefix(addr, "127.0.0.1:") +
		" && printf 'GET /p HTTP/1.0\\r\\n\\r\\n' >&3 && cat <&3"
	if res := run(t, c, "bash -c "+shellquote.Quote(get)); !strings.Contains(string(res.Stdout), "here /p") {
		t.Fatalf("through the forward: %q %q", res.Stdout, res.Stderr)
	}
	// The connection dies (its sshd process is killed); the replacement forwards the
	// same port.
	_, _ = c.Run(testCtx(t), "kill $PPID", nil)
	waitDone(t, c)
	c2 := client(t, pool, s.Addr)
	addr2, err := c2.Forward(testCtx(t), dial)
	if err != nil || addr2 != addr {
		t.Fatalf("after a reconnect: %q, %v; want %q again", addr2, err, addr)
	}
	if res := run(t, c2, "bash -c "+shellquote.Quote(get)); !strings.Contains(string(res.Stdout), "here /p") {
		t.Fatalf("through the forward after a reconnect: %q %q", res.Stdout, res.Stderr)
	}
}

func TestOpenSSHSessionLimit(t *testing.T) {
	// sshd allows 3 sessions per connection and frees one only a little after the client
	// saw it end; sshx keeps to MaxSessionsPerConn and retries the refusals of that lag.
	s := startSSHD(t, "MaxSessions 3")
	c := client(t, s.pool(t, func(c *sshx.Config) { c.MaxSessionsPerConn = 3 }), s.Addr)
	if _, err := c.SFTP(testCtx(t)); err != nil { // holds one of the three
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 30 {
		wg.Go(func() {
			res, err := c.Run(testCtx(t), fmt.Sprintf("echo %d", i), nil)
			if err != nil || strings.TrimSpace(string(res.Stdout)) != strconv.Itoa(i) {
				t.Errorf("run %d: %q, %v", i, res.Stdout, err)
			}
		})
	}
	wg.Wait()
}

func TestOpenSSHHostKeys(t *testing.T) {
	s := startSSHD(t)
	// sshd has ed25519, ECDSA and RSA keys; whichever one known_hosts lists is the one
	// verified.
	for _, kind := range []string{"ed25519", "ecdsa", "rsa"} {
		t.Run(kind, func(t *testing.T) {
			kh := s.KnownHosts(t, filepath.Join(t.TempDir(), "known_hosts"), kind)
			c := client(t, s.pool(t, func(c *sshx.Config) { c.KnownHostsFile = kh }), s.Addr)
			if got, want := c.HostKeyFingerprint(), s.fingerprint(t, kind); got != want {
				t.Errorf("verified %s, want the %s key %s", got, kind, want)
			}
		})
	}
	t.Run("changed", func(t *testing.T) {
		kh := filepath.Join(t.TempDir(), "known_hosts")
		os.WriteFile(kh, []byte(knownhosts.Line([]string{s.Addr}, sshtest.NewSigner(t).PublicKey())+"\n"), 0o644)
		_, err := s.pool(t, func(c *sshx.Config) { c.KnownHostsFile = kh }).Client(testCtx(t), s.Addr)
		if !errors.Is(err, sshx.ErrHostKeyChanged) || !strings.Contains(err.Error(), s.fingerprint(t, "ed25519")) {
			t.Errorf("Client with a different known key: %v", err)
		}
	})
	t.Run("unknown", func(t *testing.T) {
		kh := filepath.Join(t.TempDir(), "known_hosts")
		os.WriteFile(kh, nil, 0o644)
		_, err := s.pool(t, func(c *sshx.Config) { c.KnownHostsFile = kh }).Client(testCtx(t), s.Addr)
		if !errors.Is(err, sshx.ErrUnknownHostKey) || !strings.Contains(err.Error(), "SHA256:") {
			t.Errorf("Client with an empty known_hosts: %v", err)
		}
	})
}

// The benchmarks below compare sshx with the OpenSSH client against the same sshd:
// commands over one connection (sshx) vs over a ControlMaster socket (ssh), and SFTP
// file transfers (sshx) vs scp (which speaks SFTP since OpenSSH 9).

func BenchmarkOpenSSHRunTrue(b *testing.B) {
	s := startSSHD(b)
	c := client(b, s.pool(b), s.Addr)
	ctx := context.Background()
	b.ResetTimer()
	for b.Loop() {
		if res, err := c.Run(ctx, "true", nil); err != nil || res.ExitCode != 0 {
			b.Fatalf("Run: %v, exit %d", err, res.ExitCode)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "cmds/s")
}

func BenchmarkOpenSSHRunTrueParallel(b *testing.B) {
	s := startSSHD(b)
	c := client(b, s.pool(b), s.Addr)
	b.SetParallelism(4)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if res, err := c.Run(context.Background(), "true", nil); err != nil || res.ExitCode != 0 {
				b.Fatalf("Run: %v, exit %d", err, res.ExitCode)
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "cmds/s")
}

func BenchmarkOpenSSHControlMasterTrue(b *testing.B) {
	s := startSSHD(b)
	args := s.ControlMaster(b)
	b.ResetTimer()
	for b.Loop() {
		if out, err := exec.Command("ssh", append(args, "true")...).CombinedOutput(); err != nil {
			b.Fatalf("ssh true: %v\n%s", err, out)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "cmds/s")
}

const e2eFileSize = 64 << 20

func localFile(b *testing.B) string {
	path := filepath.Join(b.TempDir(), "local.bin")
	if err := os.WriteFile(path, randomBytes(b, e2eFileSize), 0o644); err != nil {
		b.Fatal(err)
	}
	return path
}

func BenchmarkOpenSSHSFTPUploadFile(b *testing.B) {
	s := startSSHD(b)
	c := client(b, s.pool(b), s.Addr)
	local, remote := localFile(b), filepath.Join(s.Dir, "up.bin")
	b.SetBytes(e2eFileSize)
	b.ResetTimer()
	for b.Loop() {
		if _, err := c.UploadFile(context.Background(), local, remote); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkOpenSSHSFTPDownloadFile(b *testing.B) {
	s := startSSHD(b)
	c := client(b, s.pool(b), s.Addr)
	remote := filepath.Join(s.Dir, "down.bin")
	if _, err := c.UploadFile(context.Background(), localFile(b), remote); err != nil {
		b.Fatal(err)
	}
	local := filepath.Join(b.TempDir(), "back.bin")
	b.SetBytes(e2eFileSize)
	b.ResetTimer()
	for b.Loop() {
		if _, err := c.DownloadFile(context.Background(), remote, local); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkOpenSSHScpUpload(b *testing.B) {
	s := startSSHD(b)
	local, remote := localFile(b), filepath.Join(s.Dir, "up.bin")
	b.SetBytes(e2eFileSize)
	b.ResetTimer()
	for b.Loop() {
		if out, err := exec.Command("scp", append(s.SSHArgs(), "-q", local, "127.0.0.1:"+remote)...).CombinedOutput(); err != nil {
			b.Fatalf("scp: %v\n%s", err, out)
		}
	}
}

func BenchmarkOpenSSHScpDownload(b *testing.B) {
	s := startSSHD(b)
	remote := filepath.Join(s.Dir, "down.bin")
	if out, err := exec.Command("scp", append(s.SSHArgs(), "-q", localFile(b), "127.0.0.1:"+remote)...).CombinedOutput(); err != nil {
		b.Fatalf("scp: %v\n%s", err, out)
	}
	local := filepath.Join(b.TempDir(), "back.bin")
	b.SetBytes(e2eFileSize)
	b.ResetTimer()
	for b.Loop() {
		if out, err := exec.Command("scp", append(s.SSHArgs(), "-q", "127.0.0.1:"+remote, local)...).CombinedOutput(); err != nil {
			b.Fatalf("scp: %v\n%s", err, out)
		}
	}
}

// BenchmarkOpenSSHRawXCryptoTrue is the floor under BenchmarkOpenSSHRunTrue: bare
// x/crypto/ssh, one connection, a session per `true`, no pool.
func BenchmarkOpenSSHRawXCryptoTrue(b *testing.B) {
	s := startSSHD(b)
	keyBytes, err := os.ReadFile(s.ClientKeyFile)
	if err != nil {
		b.Fatal(err)
	}
	signer, err := ssh.ParsePrivateKey(keyBytes)
	if err != nil {
		b.Fatal(err)
	}
	cb, err := knownhosts.New(s.KnownHostsFile)
	if err != nil {
		b.Fatal(err)
	}
	conn, err := ssh.Dial("tcp", s.Addr, &ssh.ClientConfig{User: s.User, Auth: []ssh.AuthMethod{ssh.PublicKeys(signer)},
		HostKeyCallback: cb, HostKeyAlgorithms: []string{ssh.KeyAlgoED25519}})
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	b.ResetTimer()
	for b.Loop() {
		sess, err := conn.NewSession()
		if err != nil {
			b.Fatal(err)
		}
		if err := sess.Run("true"); err != nil {
			b.Fatal(err)
		}
		sess.Close()
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "cmds/s")
}

// sideBySide times several contenders once per iteration, interleaved, so that a
// machine whose load drifts (shared CI runners) treats them alike; each reports
// work/s over its own accumulated time.
type sideBySide struct {
	names   []string
	elapsed map[string]time.Duration
	work    map[string]float64
}

func newSideBySide(names ...string) *sideBySide {
	return &sideBySide{names: names, elapsed: map[string]time.Duration{}, work: map[string]float64{}}
}

func (s *sideBySide) time(b *testing.B, name string, work float64, f func() error) {
	start := time.Now()
	if err := f(); err != nil {
		b.Fatalf("%s: %v", name, err)
	}
	s.elapsed[name] += time.Since(start)
	s.work[name] += work
}

func (s *sideBySide) report(b *testing.B, unit string) {
	for _, name := range s.names {
		b.ReportMetric(s.work[name]/s.elapsed[name].Seconds(), name+"-"+unit)
	}
}

// BenchmarkOpenSSHCommandsSideBySide: `true` through sshx one at a time, through sshx 8
// at once, and through OpenSSH's ControlMaster, interleaved.
func BenchmarkOpenSSHCommandsSideBySide(b *testing.B) {
	s := startSSHD(b)
	c := client(b, s.pool(b), s.Addr)
	cm := s.ControlMaster(b)
	ctx := context.Background()
	runTrue := func() error {
		if res, err := c.Run(ctx, "true", nil); err != nil || res.ExitCode != 0 {
			return fmt.Errorf("exit %d, %v", res.ExitCode, err)
		}
		return nil
	}
	sb := newSideBySide("sshx", "sshx8", "controlmaster")
	for b.Loop() {
		sb.time(b, "sshx", 1, runTrue)
		sb.time(b, "sshx8", 8, func() error {
			errs := make(chan error, 8)
			for range 8 {
				go func() { errs <- runTrue() }()
			}
			var err error
			for range 8 {
				err = errors.Join(err, <-errs)
			}
			return err
		})
		sb.time(b, "controlmaster", 1, func() error {
			out, err := exec.Command("ssh", append(cm, "true")...).CombinedOutput()
			if err != nil {
				return fmt.Errorf("%v: %s", err, out)
			}
			return nil
		})
	}
	sb.report(b, "cmds/s")
}

// BenchmarkOpenSSHFilesSideBySide: a 64 MiB file up and down through sshx and through
// scp, interleaved.
func BenchmarkOpenSSHFilesSideBySide(b *testing.B) {
	s := startSSHD(b)
	c := client(b, s.pool(b), s.Addr)
	local, back := localFile(b), filepath.Join(b.TempDir(), "back.bin")
	remote := filepath.Join(s.Dir, "file.bin")
	ctx := context.Background()
	scp := func(from, to string) func() error {
		return func() error {
			out, err := exec.Command("scp", append(s.SSHArgs(), "-q", from, to)...).CombinedOutput()
			if err != nil {
				return fmt.Errorf("%v: %s", err, out)
			}
			return nil
		}
	}
	const mb = float64(e2eFileSize) / 1e6
	sb := newSideBySide("sshx-up", "scp-up", "sshx-down", "scp-down")
	for b.Loop() {
		sb.time(b, "sshx-up", mb, func() error { _, err := c.UploadFile(ctx, local, remote); return err })
		sb.time(b, "scp-up", mb, scp(local, "127.0.0.1:"+remote))
		sb.time(b, "sshx-down", mb, func() error { _, err := c.DownloadFile(ctx, remote, back); return err })
		sb.time(b, "scp-down", mb, scp("127.0.0.1:"+remote, back))
	}
	sb.report(b, "MB/s")
}
