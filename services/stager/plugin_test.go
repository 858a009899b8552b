package stager

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gridwire/gridwire/events"
)

// curlPlugin is testdata/curl-plugin: the plugin contract kept by a shell script that
// moves gwhttp:// URLs with curl.
func curlPlugin(t *testing.T) Plugin {
	t.Helper()
	p, err := filepath.Abs("testdata/curl-plugin")
	if err != nil {
		t.Fatal(err)
	}
	return Plugin{Command: []string{p}, Schemes: []string{"gwhttp"}}
}

// store is a loopback web store: GET serves what was PUT (or seeded); /flaky answers
// 503 to its first two GETs.
type store struct {
	mu    sync.Mutex
	files map[string]string
	gets  map[string]int
}

func (s *store) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch r.Method {
	case http.MethodPut:
		b, _ := io.ReadAll(r.Body)
		s.files[r.URL.Path] = string(b)
	case http.MethodGet:
		s.gets[r.URL.Path]++
		body, ok := s.files[r.URL.Path]
		switch {
		case r.URL.Path == "/flaky" && s.gets["/flaky"] <= 2:
			w.WriteHeader(http.StatusServiceUnavailable)
		case !ok:
			http.NotFound(w, r)
		default:
			io.WriteString(w, body)
		}
	}
}

// A scheme served by a transfer plugin stages in and out through the plugin's
// contract, with the file's retry budget: a 503 is retried, a 404 (TransferRetryable
// = false) is one permanent attempt. Before, gwhttp:// (like gsiftp://) was refused.
func TestTransferPluginMovesFilesWithinTheirBudgets(t *testing.T) {
	st := &store{files: map[string]string{"/in": "via the plugin", "/flaky": "third time"}, gets: map[string]int{}}
	srv := httptest.NewServer(st)
	defer srv.Close()
	base := "gwhttp" + strings.TrimPrefix(srv.URL, "http")
	e := newEnv(t)
	cfg := testConfig()
	cfg.Plugins = []Plugin{curlPlugin(t)}
	e.start(cfg)

	id := e.incarnate(events.Job{MaxTransferAttempts: 3,
		StageIn:  []events.FileCopy{{From: base + "/in", To: "in.txt"}, {From: base + "/flaky", To: "flaky.txt"}},
		StageOut: []events.FileCopy{{From: "result.txt", To: base + "/out"}}}, "local", "")
	s := e.waitStatus(id, events.StatusQueued)
	wd := s.Incarnation.WorkDir
	if got := readFile(t, filepath.Join(wd, "in.txt")); got != "via the plugin" {
		t.Errorf("staged in: %q", got)
	}
	if got := readFile(t, filepath.Join(wd, "flaky.txt")); got != "third time" {
		t.Errorf("flaky: %q", got)
	}
	var flaky []events.TransferData
	for _, tr := range s.Transfers {
		if strings.HasSuffix(tr.From, "/flaky") {
			flaky = append(flaky, tr)
		}
	}
	if len(flaky) != 3 || flaky[0].Error == "" || !strings.Contains(flaky[0].Error, "HTTP 503") || flaky[2].Error != "" {
		t.Errorf("flaky attempts %+v; want two failures naming the 503, then success", flaky)
	}
	writeFile(t, filepath.Join(wd, "result.txt"), "uploaded")
	e.exit(id, 0)
	if s = e.waitStagedOut(id); !s.StagedOut.OK {
		t.Fatalf("staged_out %+v", s.StagedOut)
	}
	st.mu.Lock()
	if st.files["/out"] != "uploaded" {
		t.Errorf("uploaded %q", st.files["/out"])
	}
	st.mu.Unlock()

	id = e.incarnate(events.Job{MaxTransferAttempts: 3, StageIn: []events.FileCopy{{From: base + "/missing", To: "m"}}}, "local", "")
	s = e.waitStatus(id, events.StatusFailed)
	if len(s.Transfers) != 1 || !s.Transfers[0].Permanent || !strings.Contains(s.Reason, "HTTP 404") {
		t.Errorf("a 404: %d attempts %+v, reason %q; want one permanent attempt", len(s.Transfers), s.Transfers, s.Reason)
	}
}

// The network policy holds for plugin URLs: the stager checks the host's addresses
// before it runs the plugin.
func TestTransferPluginURLsObeyTheNetworkPolicy(t *testing.T) {
	e := newEnv(t)
	cfg := defaultConfig()
	cfg.Plugins = []Plugin{curlPlugin(t)}
	e.start(cfg)
	id := e.incarnate(events.Job{StageIn: []events.FileCopy{{From: "gwhttp://169.254.169.254/latest/meta-data", To: "m"}}}, "local", "")
	s := e.waitStatus(id, events.StatusFailed)
	if len(s.Transfers) != 1 || !s.Transfers[0].Permanent || !strings.Contains(s.Reason, "stager.http") {
		t.Errorf("a metadata address through a plugin: %+v, reason %q", s.Transfers, s.Reason)
	}
}

// A plugin's schemes are accepted at submission only where the config has the plugin,
// and a plugin that does not serve a scheme it is configured for keeps the stager
// from starting.
func TestTransferPluginConfig(t *testing.T) {
	job := events.Job{StageIn: []events.FileCopy{{From: "gwhttp://h/x", To: "x"}}, Stdout: []string{"gwhttp://h/out"}}
	if err := CheckURLs(job); !errors.Is(err, ErrScheme) {
		t.Errorf("without the plugin: %v", err)
	}
	cfg := Config{Plugins: []Plugin{curlPlugin(t)}}
	if err := cfg.CheckURLs(job); err != nil {
		t.Errorf("with the plugin: %v", err)
	}
	dir := events.Job{StageIn: []events.FileCopy{{From: "gwhttp://h/d/", To: "d"}}}
	if err := cfg.CheckURLs(dir); err == nil || !strings.Contains(err.Error(), "cannot be listed") {
		t.Errorf("a directory through a plugin: %v", err)
	}
	for _, bad := range []Plugin{{Command: []string{"relative"}, Schemes: []string{"x"}}, {Command: []string{"/bin/true"}, Schemes: []string{"https"}},
		{Command: []string{"/bin/true"}, Schemes: []string{"Bad Scheme"}}} {
		if err := (Config{Plugins: []Plugin{bad}}).Validate(); err == nil {
			t.Errorf("%+v validated", bad)
		}
	}
	p := curlPlugin(t)
	p.Schemes = []string{"gsiftp"}
	e := newEnv(t)
	err := Run(context.Background(), Config{Plugins: []Plugin{p}}, Deps{JS: e.bus.JS, Store: e.store})
	if !errors.Is(err, ErrPlugin) || !strings.Contains(err.Error(), `"gsiftp"`) {
		t.Errorf("a plugin that does not serve its scheme: %v", err)
	}
}

// BenchmarkPluginTransfer is the cost of one small file through a transfer plugin (the
// curl test plugin against a loopback web server): temporary files, the infile, one
// plugin process (sh, sed and curl), the outfile read back.
func BenchmarkPluginTransfer(b *testing.B) {
	srv := httptest.NewServer(&store{files: map[string]string{"/f": strings.Repeat("x", 4096)}, gets: map[string]int{}})
	defer srv.Close()
	p, err := filepath.Abs("testdata/curl-plugin")
	if err != nil {
		b.Fatal(err)
	}
	ep := &pluginEndpoint{p: Plugin{Command: []string{p}, Schemes: []string{"gwhttp"}, Timeout: time.Minute},
		policy: compiled(b, testPolicy())}
	url := "gwhttp" + strings.TrimPrefix(srv.URL, "http") + "/f"
	b.ResetTimer()
	for range b.N {
		r, _, err := ep.open(context.Background(), url)
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, r)
		r.Close()
	}
}
