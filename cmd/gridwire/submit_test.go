package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/gridwire/gridwire/services/ingest"
)

// fakeIngest answers POST /v1/jobs like a server that wants the names given uploaded
// first, and records what the client did.
type fakeIngest struct {
	ask []string // names the first answer asks for
	mu  sync.Mutex
	put []string            // objects uploaded
	got []ingest.Uploads    // the Gridwire-Uploads of each POST
	raw []map[string]string // bodies of the uploads, by object
}

func (f *fakeIngest) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case r.Method == http.MethodPut:
		b, _ := io.ReadAll(r.Body)
		name := strings.TrimPrefix(r.URL.Path, "/v1/uploads/")
		f.put = append(f.put, name)
		f.raw = append(f.raw, map[string]string{name: string(b)})
		w.WriteHeader(http.StatusCreated)
	case r.Method == http.MethodPost:
		up, _ := ingest.ParseUploads(r.Header.Get(ingest.HeaderUploads))
		f.got = append(f.got, up)
		if len(up) == 0 && len(f.ask) > 0 {
			w.WriteHeader(http.StatusConflict)
			json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"code": "uploads_required", "detail": "upload first", "details": f.ask}})
			return
		}
		w.WriteHeader(http.StatusCreated)
		json.NewEncoder(w).Encode(map[string]any{"jobs": []string{"01JOB"}})
	}
}

// TestSubmitUploadsWhatTheServerNames: the client parses nothing; it offers uploads,
// sends the files the server names, and submits again with their objects; a name the
// description does not contain is never sent.
func TestSubmitUploadsWhatTheServerNames(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "data"), 0o755)
	os.WriteFile(filepath.Join(dir, "data", "in.txt"), []byte("input"), 0o600)
	secret := filepath.Join(dir, "secret")
	os.WriteFile(secret, []byte("private"), 0o600)
	job := filepath.Join(dir, "job.json")
	os.WriteFile(job, []byte(`{"version":3,"executable":"/bin/cat","input_files":{"in.txt":"data/in.txt"}}`), 0o600)

	f := &fakeIngest{ask: []string{"data/in.txt"}}
	srv := httptest.NewServer(f)
	defer srv.Close()
	out, errOut, err := runCLI(context.Background(), "submit", "--server", srv.URL, job)
	if err != nil || strings.TrimSpace(out) != "01JOB" {
		t.Fatalf("%q %v\n%s", out, err, errOut)
	}
	if len(f.got) != 2 || f.got[0] == nil || len(f.got[0]) != 0 || len(f.put) != 1 || f.got[1]["data/in.txt"] != f.put[0] ||
		!strings.HasSuffix(f.put[0], "/in.txt") || f.raw[0][f.put[0]] != "input" {
		t.Fatalf("posts %v, puts %v", f.got, f.put)
	}

	f2 := &fakeIngest{ask: []string{secret}}
	srv2 := httptest.NewServer(f2)
	defer srv2.Close()
	_, errOut, err = runCLI(context.Background(), "submit", "--server", srv2.URL, job)
	if err == nil || len(f2.put) != 0 || !strings.Contains(errOut+err.Error(), "which the description does not name") {
		t.Fatalf("a server asking for a file the description does not name: %v, puts %v\n%s", err, f2.put, errOut)
	}
}

// Several files go in one bulk request, each with its own answer; a file whose local
// input the server wants uploaded first is then submitted alone, with the upload.
func TestSubmitSeveralFilesInBulk(t *testing.T) {
	target, err := url.Parse(serveCLI(t))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var posts []string
	proxy := httputil.NewSingleHostReverseProxy(target)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			mu.Lock()
			posts = append(posts, r.URL.Path)
			mu.Unlock()
		}
		proxy.ServeHTTP(w, r)
	}))
	defer srv.Close()
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "in.txt"), []byte("input"), 0o600)
	files := []string{
		writeFile(t, dir, "a.json", `{"version":3,"executable":"/bin/true"}`),
		writeFile(t, dir, "b.json", `{"version":3,"executable":"/bin/cat","input_files":{"in.txt":"in.txt"}}`),
		writeFile(t, dir, "c.json", `{"version":3,"executable":"/bin/true"}`),
	}
	status, out, errOut := cli(context.Background(), append([]string{"submit", "--wait", "--server", srv.URL}, files...)...)
	if status != 0 || strings.Count(out, "SUCCEEDED") != 3 {
		t.Fatalf("exit %d\n%s\n%s", status, out, errOut)
	}
	mu.Lock()
	defer mu.Unlock()
	if d := cmp.Diff([]string{"/v1/jobs/bulk", "/v1/jobs", "/v1/jobs"}, posts); d != "" {
		t.Fatalf("requests (-want +got):\n%s", d)
	}
}
