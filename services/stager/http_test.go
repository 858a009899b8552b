package stager

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/gridwire/gridwire/events"
)

// flaky serves body after failing the first `fails` requests with 503.
func flaky(t *testing.T, fails int, body string) (*httptest.Server, *atomic.Int64) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) <= int64(fails) {
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

func sum(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// attemptView is what a test compares of a transfer record (not durations or texts).
type attemptView struct {
	To                string
	Attempt, Of       int
	Bytes             int64
	SHA256            string
	Failed, Permanent bool
	Backoff           time.Duration
}

func view(ts []events.TransferData) []attemptView {
	var out []attemptView
	for _, t := range ts {
		out = append(out, attemptView{To: t.To, Attempt: t.Attempt, Of: t.Of, Bytes: t.Bytes, SHA256: t.SHA256,
			Failed: t.Error != "", Permanent: t.Permanent, Backoff: t.Backoff})
	}
	return out
}

func TestStageInHTTPRetriesWithinBudget(t *testing.T) {
	e := newEnv(t)
	e.start(testConfig())
	const body = "input data\n"
	for _, tc := range []struct {
		name   string
		fails  int
		budget int
		want   events.Status
	}{
		{"succeeds on the third of three", 2, 3, events.StatusQueued},
		{"fails when every attempt fails", 3, 3, events.StatusFailed},
		{"first attempt", 0, 2, events.StatusQueued},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, hits := flaky(t, tc.fails, body)
			id := e.incarnate(events.Job{MaxTransferAttempts: tc.budget,
				StageIn: []events.FileCopy{{From: srv.URL + "/in.dat", To: "data/in.dat"}}}, "local", "")
			st := e.waitStatus(id, tc.want)
			var want []attemptView
			backoff := time.Millisecond
			for k := 1; k <= min(tc.fails+1, tc.budget); k++ {
				a := attemptView{To: "data/in.dat", Attempt: k, Of: tc.budget}
				if k <= tc.fails {
					a.Failed = true
					if k < tc.budget {
						a.Backoff = backoff
						backoff *= 2
					}
				} else {
					a.Bytes, a.SHA256 = int64(len(body)), sum(body)
				}
				want = append(want, a)
			}
			if diff := cmp.Diff(want, view(st.Transfers)); diff != "" {
				t.Errorf("attempt records (-want +got):\n%s", diff)
			}
			if got := hits.Load(); got != int64(len(want)) {
				t.Errorf("server saw %d requests, want %d", got, len(want))
			}
			switch tc.want {
			case events.StatusQueued:
				if got := readFile(t, filepath.Join(st.Incarnation.WorkDir, "data/in.dat")); got != body {
					t.Errorf("staged file holds %q", got)
				}
				if n := e.names(id); n[2] != events.StagingIn || n[len(n)-1] != events.Queued {
					t.Errorf("events %v", n)
				}
			case events.StatusFailed:
				if !strings.Contains(st.Reason, "data/in.dat") || !strings.Contains(st.Reason, "503") {
					t.Errorf("failure reason does not name the file and last error: %q", st.Reason)
				}
			}
		})
	}
}

func TestStageInNothingQueuesAtOnceAndMakesTheWorkDir(t *testing.T) {
	e := newEnv(t)
	e.start(testConfig())
	id := e.incarnate(events.Job{}, "local", "")
	st := e.waitStatus(id, events.StatusQueued)
	if diff := cmp.Diff([]events.Name{events.Submitted, events.Incarnated, events.Queued}, e.names(id)); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if fi, err := statDir(filepath.Join(st.Incarnation.WorkDir, events.ControlDir)); err != nil || !fi {
		t.Errorf("working directory not made: %v", err)
	}
}

func TestStageOutStdioToEveryDestinationAsAskedThenCleanup(t *testing.T) {
	e := newEnv(t)
	e.start(testConfig())
	var mu sync.Mutex
	puts := map[string]string{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPut {
			http.Error(w, "put only", http.StatusMethodNotAllowed)
			return
		}
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		puts[r.URL.Path] = string(b)
		mu.Unlock()
		w.WriteHeader(http.StatusCreated)
	}))
	defer srv.Close()
	out := t.TempDir()
	id := e.incarnate(events.Job{
		Stdout: []string{"file://" + out + "/stdout.txt", srv.URL + "/logs/stdout", "copy/stdout.2"},
		Stderr: []string{srv.URL + "/logs/stderr"},
		StageOut: []events.FileCopy{
			{From: "result.txt", To: "results/result.txt", When: WhenSuccess},
			{From: "core", To: "results/core", When: WhenFailure},
			{From: "outdir", To: srv.URL + "/tree/"},
		},
		DefaultStorageBase: "file://" + out,
		Cleanup:            []string{"scratch", "tmp.dat", "never-made"},
	}, "local", "")
	st := e.waitStatus(id, events.StatusQueued)
	wd := st.Incarnation.WorkDir
	writeFile(t, filepath.Join(wd, events.StdoutFile), "hello out\n")
	writeFile(t, filepath.Join(wd, events.StderrFile), "hello err\n")
	writeFile(t, filepath.Join(wd, "result.txt"), "42\n")
	writeFile(t, filepath.Join(wd, "core"), "dump")
	writeFile(t, filepath.Join(wd, "outdir/a.txt"), "A")
	writeFile(t, filepath.Join(wd, "outdir/sub/b.txt"), "B")
	writeFile(t, filepath.Join(wd, "scratch/x"), "x")
	writeFile(t, filepath.Join(wd, "tmp.dat"), "t")
	e.exit(id, 0)
	st = e.waitStagedOut(id)
	want := events.StagedOutData{OK: true, Files: 6, Cleaned: []string{"scratch", "tmp.dat", "never-made"}}
	if diff := cmp.Diff(want, *st.StagedOut); diff != "" {
		t.Errorf("staged_out (-want +got):\n%s", diff)
	}
	for p, content := range map[string]string{"stdout.txt": "hello out\n", "copy/stdout.2": "hello out\n", "results/result.txt": "42\n"} {
		if got := readFile(t, filepath.Join(out, p)); got != content {
			t.Errorf("%s holds %q, want %q", p, got, content)
		}
	}
	if _, err := statDir(filepath.Join(out, "results/core")); err == nil {
		t.Error("a failure-only output was staged after success")
	}
	wantPuts := map[string]string{"/logs/stdout": "hello out\n", "/logs/stderr": "hello err\n", "/tree/a.txt": "A", "/tree/sub/b.txt": "B"}
	mu.Lock()
	if diff := cmp.Diff(wantPuts, puts); diff != "" {
		t.Errorf("PUTs (-want +got):\n%s", diff)
	}
	mu.Unlock()
	for _, gone := range []string{"scratch", "tmp.dat"} {
		if _, err := statDir(filepath.Join(wd, gone)); err == nil {
			t.Errorf("%s was not cleaned up", gone)
		}
	}
	if _, err := statDir(filepath.Join(wd, "result.txt")); err != nil {
		t.Errorf("cleanup removed what it was not asked to: %v", err)
	}
}

func TestStageOutFailureIsReportedNotHidden(t *testing.T) {
	e := newEnv(t)
	e.start(testConfig())
	srv, _ := flaky(t, 100, "")
	id := e.incarnate(events.Job{MaxTransferAttempts: 2,
		Stdout: []string{srv.URL + "/stdout"}}, "local", "")
	st := e.waitStatus(id, events.StatusQueued)
	writeFile(t, filepath.Join(st.Incarnation.WorkDir, events.StdoutFile), "out")
	e.exit(id, 0)
	st = e.waitStagedOut(id)
	if st.StagedOut.OK || len(st.StagedOut.Failed) != 1 || !strings.Contains(st.StagedOut.Failed[0], "503") {
		t.Errorf("staged_out: %+v", st.StagedOut)
	}
	if len(st.Transfers) != 2 {
		t.Errorf("want 2 attempts, got %+v", st.Transfers)
	}
}

func TestHTTPSWithTheSitesCA(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "secure") }))
	defer srv.Close()
	ca := filepath.Join(t.TempDir(), "ca.pem")
	writeFile(t, ca, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})))
	e := newEnv(t)
	cfg := testConfig()
	cfg.HTTP.CAFile = ca
	e.start(cfg)
	id := e.incarnate(events.Job{StageIn: []events.FileCopy{{From: srv.URL + "/x", To: "x"}}}, "local", "")
	st := e.waitStatus(id, events.StatusQueued)
	if got := readFile(t, filepath.Join(st.Incarnation.WorkDir, "x")); got != "secure" {
		t.Errorf("got %q", got)
	}
	// Without the CA the same server is not trusted.
	if _, _, err := newHTTPEndpoint(compiled(t, testPolicy()), 0, nil, nil).open(t.Context(), srv.URL+"/x"); err == nil {
		t.Error("an unknown CA was trusted")
	}
}
