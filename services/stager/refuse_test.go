package stager

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gridwire/gridwire/events"
)

func TestStageInRefusesNamesThatLeaveTheWorkDir(t *testing.T) {
	e := newEnv(t)
	e.start(testConfig())
	src := filepath.Join(t.TempDir(), "src.txt")
	writeFile(t, src, "payload")
	outside := t.TempDir()
	for _, tc := range []struct {
		name, to string
		prepare  func(wd string)
	}{
		{"dot-dot", "../escaped.txt", nil},
		{"absolute", "/tmp/escaped.txt", nil},
		{"control directory", ".gridwire/job.sh", nil},
		{"symlinked directory", "link/escaped.txt", func(wd string) {
			if err := os.MkdirAll(wd, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(outside, filepath.Join(wd, "link")); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wd := filepath.Join(t.TempDir(), "wd")
			if tc.prepare != nil {
				tc.prepare(wd)
			}
			id := e.incarnate(events.Job{MaxTransferAttempts: 3,
				StageIn: []events.FileCopy{{From: src, To: tc.to}}}, "local", wd)
			st := e.waitStatus(id, events.StatusFailed)
			if len(st.Transfers) != 1 || !st.Transfers[0].Permanent {
				t.Errorf("want one permanent refusal, got %+v", st.Transfers)
			}
			if !strings.Contains(st.Reason, tc.to) {
				t.Errorf("reason does not name %s: %q", tc.to, st.Reason)
			}
		})
	}
	entries, _ := os.ReadDir(outside)
	if len(entries) != 0 {
		t.Errorf("a file was written outside the working directory: %v", entries)
	}
}

func TestStageOutRefusesASymlinkOutOfTheWorkDir(t *testing.T) {
	e := newEnv(t)
	e.start(testConfig())
	secret := filepath.Join(t.TempDir(), "secret")
	writeFile(t, secret, "do not copy")
	out := t.TempDir()
	id := e.incarnate(events.Job{DefaultStorageBase: "file://" + out,
		StageOut: []events.FileCopy{{From: "innocent.txt", To: "got.txt"}}}, "local", "")
	st := e.waitStatus(id, events.StatusQueued)
	if err := os.Symlink(secret, filepath.Join(st.Incarnation.WorkDir, "innocent.txt")); err != nil {
		t.Fatal(err)
	}
	e.exit(id, 0)
	st = e.waitStagedOut(id)
	if st.StagedOut.OK || !strings.Contains(st.StagedOut.Reason, "outside the working directory") {
		t.Errorf("staged_out: %+v", st.StagedOut)
	}
	if _, err := os.Stat(filepath.Join(out, "got.txt")); err == nil {
		t.Error("the symlink's target was copied out")
	}
}

func TestHTTPPolicyRefusesMetadataAndDeniedAddresses(t *testing.T) {
	ok := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "fine") }))
	defer ok.Close()
	redirect := func(to string) *httptest.Server {
		s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, to, http.StatusFound)
		}))
		t.Cleanup(s.Close)
		return s
	}
	port := ok.URL[strings.LastIndex(ok.URL, ":"):]
	for _, tc := range []struct {
		name   string
		policy HTTPPolicy
		url    string
		refuse bool
	}{
		{"loopback is denied by default", HTTPPolicy{}, ok.URL, true},
		{"loopback opened by the allow list", testPolicy(), ok.URL, false},
		{"link-local metadata address", HTTPPolicy{}, "http://169.254.169.254/latest/meta-data/", true},
		{"GCP metadata name", HTTPPolicy{}, "http://metadata.google.internal/computeMetadata/v1/", true},
		{"AWS IPv6 metadata", HTTPPolicy{}, "http://[fd00:ec2::254]/latest/", true},
		{"redirect to metadata", testPolicy(), redirect("http://169.254.169.254/latest/meta-data/").URL, true},
		{"redirect to a denied name", testPolicy(), redirect("http://metadata.google.internal/").URL, true},
		{"name resolving to a denied network", HTTPPolicy{Allow: []string{"localhost"}, Deny: []string{"127.0.0.0/8"}}, "http://localhost" + port, true},
		{"redirect to a host resolving to a denied network", HTTPPolicy{Allow: []string{"127.0.0.1"}, Deny: []string{"::1/128", "127.0.0.2/32"}},
			redirect("http://127.0.0.2" + port + "/").URL, true},
		{"not in the allow list", HTTPPolicy{Allow: []string{"10.0.0.0/8"}}, ok.URL, true},
		{"in the allow list", HTTPPolicy{Allow: []string{"127.0.0.1"}}, ok.URL, false},
		{"allowed by name", HTTPPolicy{Allow: []string{"localhost"}}, "http://localhost" + port, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := tc.policy.compile()
			if err != nil {
				t.Fatal(err)
			}
			h := newHTTPEndpoint(p, 0, nil, nil)
			r, _, err := h.open(t.Context(), tc.url)
			if err == nil {
				r.Close()
			}
			if got := errors.Is(err, ErrPolicy); got != tc.refuse {
				t.Fatalf("refused=%v, want %v (err %v)", got, tc.refuse, err)
			}
			if tc.refuse && !isPermanent(err) {
				t.Errorf("a policy refusal must not be retried: %v", err)
			}
		})
	}
}

func TestPolicyRefusalFailsTheJobInOneAttempt(t *testing.T) {
	e := newEnv(t)
	e.start(testConfig())
	id := e.incarnate(events.Job{MaxTransferAttempts: 5,
		StageIn: []events.FileCopy{{From: "http://169.254.169.254/latest/meta-data/iam", To: "creds"}}}, "local", "")
	st := e.waitStatus(id, events.StatusFailed)
	if len(st.Transfers) != 1 || !strings.Contains(st.Transfers[0].Error, "169.254.0.0/16") {
		t.Errorf("transfers: %+v", st.Transfers)
	}
}

func TestSizeLimit(t *testing.T) {
	big := strings.Repeat("x", 100)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/chunked" {
			w.(http.Flusher).Flush() // no Content-Length: the limit must hold while streaming
		}
		io.WriteString(w, big)
	}))
	defer srv.Close()
	p := compiled(t, testPolicy())
	c := copier{limit: 10}
	wd := openLocalDir(t.TempDir())
	defer wd.Close()
	for _, path := range []string{"/sized", "/chunked"} {
		_, err := c.copyItem(t.Context(), newHTTPEndpoint(p, 0, nil, nil), srv.URL+path, wd, "f", false)
		if !errors.Is(err, ErrTooLarge) || !isPermanent(err) {
			t.Errorf("%s: want a permanent size refusal, got %v", path, err)
		}
	}
}
