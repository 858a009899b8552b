//go:build e2e

package main

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/pkg/cluster"
)

// gridFTPServer starts Debian's globus-gridftp-server on a loopback port, anonymous FTP
// only (GSI needs an X.509 CA, a host certificate and a user proxy, none of which a
// test machine has), serving dir. scripts/install-gridftp.sh installs it.
func gridFTPServer(t *testing.T, dir string) string {
	t.Helper()
	for _, p := range []string{"globus-gridftp-server", "globus-url-copy"} {
		if _, err := exec.LookPath(p); err != nil {
			t.Fatalf("%s is not installed: run scripts/install-gridftp.sh (%v)", p, err)
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	_, port, _ := net.SplitHostPort(addr)
	args := []string{"-aa", "-control-interface", "127.0.0.1", "-data-interface", "127.0.0.1", "-p", port, "-home-dir", dir}
	if os.Geteuid() == 0 {
		args = append(args, "-anonymous-user", "nobody") // the server maps no one to root
	}
	cmd := exec.Command("globus-gridftp-server", args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := os.Create(filepath.Join(t.TempDir(), "gridftp.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pgid := cmd.Process.Pid
	t.Cleanup(func() {
		syscall.Kill(-pgid, syscall.SIGKILL) // the server and the children it forked per session
		cmd.Wait()
	})
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return addr
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(out.Name())
			t.Fatalf("globus-gridftp-server did not listen on %s: %s", addr, b)
		}
	}
}

// A JRDL job stages its input in from a real GridFTP server and its result out to it,
// through the stager's transfer plugin contract and `gridwire transfer-plugin
// globus-url-copy`; a file the server does not have fails the job after one permanent
// attempt (FTP 550).
func TestE2EGridFTPPlugin(t *testing.T) {
	data, err := os.MkdirTemp("/tmp", "gw-gridftp-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(data) })
	if err := os.Chmod(data, 0o777); err != nil { // the server's anonymous user writes here
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(data, "in.txt"), []byte("over gridftp\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := gridFTPServer(t, data)
	bin := buildBinary(t)
	cfg, err := cluster.Parse("gridftp.yaml", []byte(fmt.Sprintf(`clusters:
  - {name: local, kind: fork, profile: fork, lrms: Fork}
stager:
  http: {allow: ["127.0.0.1"]}
  plugins:
    - command: [%q, transfer-plugin, globus-url-copy]
      schemes: [gsiftp, ftp]
`, bin)))
	if err != nil {
		t.Fatal(err)
	}
	h := newHarnessWith(t, cfg)
	base := "ftp://" + addr + data
	ids := h.submitJRDL(jrdlJob(`<stringElement value="tr a-z A-Z &lt; in.txt &gt; out.txt"/>`, `
<fileStageIn><fileInputArray><fileInput><url><urlElement value="`+base+`/in.txt"/></url><path><stringElement value="in.txt"/></path></fileInput></fileInputArray></fileStageIn>
<fileStageOut><fileOutputArray><fileOutput><path><stringElement value="out.txt"/></path><url><urlElement value="`+base+`/out.txt"/></url></fileOutput></fileOutputArray></fileStageOut>`))
	st := h.waitEnd(ids[0])
	if st.Status != events.StatusSucceeded {
		t.Fatalf("%s (%s)", st.Status, st.Reason)
	}
	if out, err := os.ReadFile(filepath.Join(data, "out.txt")); string(out) != "OVER GRIDFTP\n" {
		t.Errorf("uploaded over GridFTP: %q (%v)", out, err)
	}

	ids = h.submitJRDL(jrdlJob(`<stringElement value="true"/>`, `
<fileStageIn><fileInputArray><fileInput><url><urlElement value="`+base+`/missing.txt"/></url><path><stringElement value="m"/></path></fileInput></fileInputArray></fileStageIn>`))
	st = h.waitEnd(ids[0])
	if st.Status != events.StatusFailed || len(st.Transfers) != 1 || !st.Transfers[0].Permanent || !strings.Contains(st.Reason, "globus-url-copy") {
		t.Errorf("a missing file: %s (%s), transfers %+v; want FAILED after one permanent attempt", st.Status, st.Reason, st.Transfers)
	}
}
