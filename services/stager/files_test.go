package stager

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gridwire/gridwire/events"
)

// defaultConfig is the stager as an operator gets it with no stager section: no file
// root, the default network policy (only back-off shortened).
func defaultConfig() Config {
	return Config{BackoffBase: time.Millisecond, BackoffMax: 50 * time.Millisecond}
}

// The reproductions of issue 19, each run through a stager with the default config:
// every one of them staged the file on the old main.
func TestDefaultConfigStagesNoGatewayFileAndNoLocalAddress(t *testing.T) {
	e := newEnv(t)
	e.start(defaultConfig())
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"jobs":[]}`)
	}))
	defer api.Close()
	port := api.URL[strings.LastIndex(api.URL, ":"):]
	for _, from := range []string{"file:///etc/passwd", "/etc/passwd", api.URL + "/v1/jobs",
		"http://[::ffff:127.0.0.1]" + port + "/v1/jobs", "http://ok@127.0.0.1" + port + "/v1/jobs", "http://0.0.0.0" + port + "/v1/jobs"} {
		id := e.incarnate(events.Job{MaxTransferAttempts: 3, StageIn: []events.FileCopy{{From: from, To: "got"}}}, "local", "")
		st := e.waitStatus(id, events.StatusFailed)
		if _, err := os.Stat(filepath.Join(st.Incarnation.WorkDir, "got")); err == nil {
			t.Errorf("%s was staged into the job", from)
		}
		if len(st.Transfers) != 1 || !st.Transfers[0].Permanent ||
			!strings.Contains(st.Reason, "stager.file_roots") && !strings.Contains(st.Reason, "stager.http") {
			t.Errorf("%s: want one permanent refusal naming the policy, got %q %+v", from, st.Reason, st.Transfers)
		}
	}
	// An output and stdout naming an absolute path outside the job.
	outside := filepath.Join(t.TempDir(), "written-by-a-job")
	id := e.incarnate(events.Job{Stdout: []string{outside}, StageOut: []events.FileCopy{{From: "f", To: "file://" + outside + ".2"}}}, "local", "")
	st := e.waitStatus(id, events.StatusQueued)
	writeFile(t, filepath.Join(st.Incarnation.WorkDir, "f"), "x")
	writeFile(t, filepath.Join(st.Incarnation.WorkDir, events.StdoutFile), "out")
	e.exit(id, 0)
	st = e.waitStagedOut(id)
	if st.StagedOut.OK || !strings.Contains(st.StagedOut.Reason, "stager.file_roots") {
		t.Errorf("stage-out outside every root: %+v", st.StagedOut)
	}
	for _, p := range []string{outside, outside + ".2"} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s was written", p)
		}
	}
}

// A root opened to one cluster, one principal or one direction opens nothing else; a
// {principal} root gives each principal its own directory.
func TestFileRootsPerClusterPrincipalAndAccess(t *testing.T) {
	base := t.TempDir()
	for _, d := range []string{"shared", "ann", "bob", "out"} {
		writeFile(t, filepath.Join(base, d, "f"), d)
	}
	roots := []FileRoot{
		{Path: filepath.Join(base, "shared"), Clusters: []string{"hpc"}},
		{Path: filepath.Join(base, PrincipalPlaceholder), Access: AccessReadWrite, Principals: []string{"ann", "bob"}},
		{Path: filepath.Join(base, "out"), Access: AccessWrite},
	}
	cases := []struct {
		cluster, principal, name, want string
		ok                             bool
	}{
		{"hpc", "ann", "shared/f", AccessRead, true},
		{"local", "ann", "shared/f", AccessRead, false},
		{"hpc", "ann", "shared/f", AccessWrite, false},
		{"hpc", "ann", "ann/f", AccessRead, true},
		{"hpc", "ann", "ann/new", AccessWrite, true},
		{"hpc", "ann", "bob/f", AccessRead, false},
		{"hpc", "eve", "eve/f", AccessRead, false},
		{"hpc", "../x", "../x/f", AccessRead, false},
		{"hpc", "ann", "out/f", AccessRead, false},
		{"hpc", "ann", "out/new", AccessWrite, true},
	}
	for _, c := range cases {
		h := hostFS{roots: roots, cluster: c.cluster, principal: c.principal}
		err := h.check(filepath.Join(base, c.name), c.want)
		if (err == nil) != c.ok || err != nil && !errors.Is(err, ErrFileRoot) {
			t.Errorf("%+v: %v", c, err)
		}
	}
}

// TestTraversalCorpus tries names and symlink tricks against a job's working directory
// (stage-in destinations, stage-out sources, cleanup) and against a file root (file://
// sources and destinations), with the gateway's data directory inside the root. A secret
// outside every root and a key in the data directory must never be read, and nothing may
// be written outside the root and the working directory. Counts are printed.
func TestTraversalCorpus(t *testing.T) {
	base := t.TempDir()
	root := filepath.Join(base, "root")
	outside := filepath.Join(base, "outside")
	data := filepath.Join(root, "gwdata") // the gateway's own data, inside the root
	wd := filepath.Join(base, "wd")
	const secret, key = "SECRET-OUTSIDE", "GATEWAY-KEY"
	writeFile(t, filepath.Join(outside, "secret"), secret)
	writeFile(t, filepath.Join(data, "nats.creds"), key)
	writeFile(t, filepath.Join(root, "ok.txt"), "fine")
	writeFile(t, filepath.Join(wd, "payload"), "payload")
	links := map[string]string{ // in the root
		"out": outside, "outfile": filepath.Join(outside, "secret"), "abs": "/", "loop": "loop",
		"chain1": "chain2", "chain2": outside, "rel": "../outside", "datalink": "gwdata", "keylink": "gwdata/nats.creds",
		"dotdot": "..", "self": ".", "deep": "self/self/self/../outside", "etc": "/etc",
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(root, name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Link(filepath.Join(outside, "secret"), filepath.Join(root, "hardlink")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(root, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, target := range map[string]string{"wdout": outside, "wdfile": filepath.Join(outside, "secret"), "wdroot": "/"} {
		if err := os.Symlink(target, filepath.Join(wd, name)); err != nil {
			t.Fatal(err)
		}
	}
	h := hostFS{roots: []FileRoot{{Path: root, Access: AccessReadWrite}}, protected: protectedPaths([]string{data})}
	local := openLocalDir(wd)
	defer local.Close()

	var tried, refused, accepted, leaked int
	try := func(what string, wantOK bool, err error, got string) {
		tried++
		if err == nil {
			accepted++
		} else {
			refused++
		}
		if strings.Contains(got, secret) || strings.Contains(got, key) {
			leaked++
			t.Errorf("%s: leaked %q", what, got)
		}
		if (err == nil) != wantOK {
			t.Errorf("%s: err %v, want ok=%v", what, err, wantOK)
		}
	}
	read := func(name string) (string, error) {
		r, _, err := h.open(t.Context(), name)
		if err != nil {
			return "", err
		}
		defer r.Close()
		b, err := io.ReadAll(r)
		return string(b), err
	}
	// file:// sources: only ok.txt may be read.
	reads := []string{"/etc/passwd", "/etc/shadow", root + "/../outside/secret", root + "/./../outside/secret",
		root + "//..//outside/secret", root + "/out/secret", root + "/outfile", root + "/abs/etc/passwd",
		root + "/loop", root + "/chain1/secret", root + "/rel/secret", root + "/gwdata/nats.creds",
		root + "/datalink/nats.creds", root + "/keylink", root + "/hardlink", root + "/fifo", root + "/dotdot/outside/secret",
		root + "/self/self/../outside/secret", root + "/deep/secret", root + "/etc/passwd", root + "\x00/ok.txt",
		root + "/ok.txt\n", root + "/ok.txt/..", outside + "/secret", root + "x/ok.txt", base + "/root", "relative/ok.txt",
		root + "/", root + "/gwdata"}
	for _, name := range reads {
		got, err := read(name)
		try("read "+name, false, err, got)
	}
	got, err := read(root + "/ok.txt")
	try("read ok.txt", true, err, got)
	// file:// destinations: nothing may be created or changed outside the root, nor in
	// the data directory.
	writes := []string{outside + "/new", root + "/../outside/new", root + "/out/new", root + "/outfile",
		root + "/abs/tmp/new", root + "/chain1/new", root + "/rel/new", root + "/gwdata/new", root + "/datalink/new",
		root + "/keylink", root + "/hardlink", root + "/fifo", root + "/etc/new", root + "/loop/new", "/etc/cron.d/job"}
	for _, name := range writes {
		err := h.put(t.Context(), name, strings.NewReader("overwritten"), 11)
		try("write "+name, false, err, "")
	}
	err = h.put(t.Context(), root+"/sub/dir/new", strings.NewReader("ok"), 2)
	try("write sub/dir/new", true, err, "")
	// Names in the working directory: stage-in destinations and stage-out sources.
	names := []string{"../x", "../../etc/cron.d/x", "/abs", "/etc/passwd", ".gridwire/job.sh", ".gridwire",
		"a/../../x", "./../x", "..", "x/../../y", "wdout/x", "wdfile", "wdroot/etc/passwd", "a\x00b", "a\nb",
		"\x1b[31m", strings.Repeat("a/", MaxNameBytes), ""}
	for _, name := range names {
		n, err := localName(name)
		if err == nil {
			_, err = local.writeFile(t.Context(), n)
		}
		try("stage-in to "+fmt.Sprintf("%.40q", name), false, err, "")
		if n, err = localName(name); err == nil {
			var r io.ReadCloser
			if r, _, err = local.open(t.Context(), n); err == nil {
				b, _ := io.ReadAll(r)
				r.Close()
				got = string(b)
			}
		}
		try("stage-out from "+fmt.Sprintf("%.40q", name), false, err, got)
	}
	n, err := localName("payload")
	if err == nil {
		var r io.ReadCloser
		if r, _, err = local.open(t.Context(), n); err == nil {
			r.Close()
		}
	}
	try("stage-out from payload", true, err, "")
	if b, _ := os.ReadFile(filepath.Join(outside, "secret")); string(b) != secret {
		t.Errorf("the secret was changed: %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(data, "nats.creds")); string(b) != key {
		t.Errorf("the key was changed: %q", b)
	}
	entries, _ := os.ReadDir(outside)
	if len(entries) != 1 {
		t.Errorf("files were written outside: %v", entries)
	}
	t.Logf("traversal corpus: tried %d, refused %d, accepted %d, leaked %d", tried, refused, accepted, leaked)
	fmt.Printf("traversal corpus: tried %d, refused %d, accepted %d, leaked %d\n", tried, refused, accepted, leaked)
	if tried < 30 {
		t.Errorf("only %d tried", tried)
	}
}
