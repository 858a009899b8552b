package stager

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gridwire/gridwire/events"
	"go.yaml.in/yaml/v3"
)

// The transfers of one job overlap, but never more than Parallel at once.
func TestTransfersOfAJobRunConcurrentlyUpToTheLimit(t *testing.T) {
	e := newEnv(t)
	cfg := testConfig()
	cfg.Parallel = 2
	e.start(cfg)
	var mu sync.Mutex
	inflight, peak := 0, 0
	pair := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		inflight++
		peak = max(peak, inflight)
		if inflight == 2 {
			close(pair) // the first two requests meet here; later ones pass
			pair = make(chan struct{})
		}
		wait := pair
		mu.Unlock()
		select { // the first pair must overlap; stragglers go on after a while
		case <-wait:
		case <-time.After(time.Second):
		}
		io.WriteString(w, r.URL.Path)
		mu.Lock()
		inflight--
		mu.Unlock()
	}))
	defer srv.Close()
	var in []events.FileCopy
	for _, n := range []string{"a", "b", "c", "d", "e", "f"} {
		in = append(in, events.FileCopy{From: srv.URL + "/" + n, To: n})
	}
	id := e.incarnate(events.Job{StageIn: in}, "local", "")
	e.waitStatus(id, events.StatusQueued)
	mu.Lock()
	defer mu.Unlock()
	if peak != 2 {
		t.Errorf("at most %d transfers overlapped, want exactly the limit 2", peak)
	}
}

func TestCancelWhileStagingInStopsAfterTheAttempt(t *testing.T) {
	e := newEnv(t)
	e.start(testConfig())
	started, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		once.Do(func() { close(started) })
		<-release
		io.WriteString(w, "x")
	}))
	defer srv.Close()
	id := e.incarnate(events.Job{StageIn: []events.FileCopy{{From: srv.URL + "/1", To: "1"}, {From: srv.URL + "/2", To: "2"}}}, "local", "")
	<-started
	e.append(id, events.CancelRequested, "", events.Note{Reason: "test"})
	close(release)
	st := e.waitStatus(id, events.StatusCancelled)
	if len(st.Transfers) == 0 || len(st.Transfers) > 2 {
		t.Errorf("transfers: %+v", st.Transfers)
	}
	names := e.names(id)
	if names[len(names)-1] != events.Cancelled {
		t.Errorf("events after the cancel: %v", names)
	}
}

func TestTheJobsProgramIsStagedExecutable(t *testing.T) {
	e := newEnv(t)
	e.start(testConfig())
	src := filepath.Join(t.TempDir(), "prog.sh")
	writeFile(t, src, "#!/bin/sh\necho hi\n")
	id := e.incarnate(events.Job{Executable: "bin/prog.sh", StageIn: []events.FileCopy{
		{From: src, To: "bin/prog.sh"}, {From: src, To: "data.sh"}}}, "local", "")
	st := e.waitStatus(id, events.StatusQueued)
	for name, mode := range map[string]os.FileMode{"bin/prog.sh": 0o755, "data.sh": 0o644} {
		fi, err := os.Stat(filepath.Join(st.Incarnation.WorkDir, name))
		if err != nil || fi.Mode().Perm() != mode {
			t.Errorf("%s: mode %v, want %v (%v)", name, fi.Mode().Perm(), mode, err)
		}
	}
}

// When stage-out cannot even start on any delivery, the log still says so, with
// staged_out{OK: false}, so the watcher can end the job.
func TestExhaustedStageOutIsRecordedAsFailedStageOut(t *testing.T) {
	e := newEnv(t) // no stager runs: this one only records the exhaustion
	id := e.incarnate(events.Job{}, "local", "")
	e.append(id, events.Queued, "local", events.QueuedData{Cluster: "local"})
	e.exit(id, 0)
	s, err := newStager(context.Background(), testConfig().withDefaults(), Deps{Store: e.store, Now: time.Now, Logger: discard()})
	if err != nil {
		t.Fatal(err)
	}
	s.exhausted(context.Background(), events.Delivery{Event: events.Event{JobID: id}}, errors.New("host unreachable"))
	st := e.waitStagedOut(id)
	if st.StagedOut.OK || st.Status != events.StatusStagingOut {
		t.Errorf("after exhausted stage-out: %s %+v", st.Status, st.StagedOut)
	}
}

func TestFileRootsConfineFileURLs(t *testing.T) {
	root := t.TempDir()
	outside := t.TempDir()
	writeFile(t, filepath.Join(root, "ok.txt"), "ok")
	writeFile(t, filepath.Join(outside, "secret"), "no")
	if err := os.Symlink(filepath.Join(outside, "secret"), filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
	h := hostFS{roots: []FileRoot{{Path: root}}}
	for name, ok := range map[string]bool{
		filepath.Join(root, "ok.txt"): true, filepath.Join(root, "new/file"): true,
		filepath.Join(outside, "secret"): false, filepath.Join(root, "link"): false, root + "/../x": false,
	} {
		if err := h.check(name, AccessRead); (err == nil) != ok {
			t.Errorf("%s: allowed=%v, want %v (%v)", name, err == nil, ok, err)
		}
	}
	if _, _, err := (hostFS{}).open(t.Context(), filepath.Join(outside, "secret")); !errors.Is(err, ErrFileRoot) {
		t.Errorf("without roots a file URL must be refused: %v", err)
	}
	if err := h.check(filepath.Join(root, "ok.txt"), AccessWrite); !errors.Is(err, ErrFileRoot) {
		t.Errorf("a read root was opened to writing: %v", err)
	}
}

func TestConfigFromYAML(t *testing.T) {
	var cfg Config
	src := "max_transfer_attempts: 5\nbackoff_base: 2s\nhttp:\n  allow: [storage.example.org]\n  deny: [10.0.0.0/8]\nfile_roots: [/srv/data, {path: \"/srv/out/{principal}\", access: write, clusters: [hpc], principals: [ann]}]\nssh:\n  user: stager\n" +
		"plugins:\n  - command: [/usr/local/bin/gridwire, transfer-plugin, globus-url-copy]\n    schemes: [gsiftp, ftp]\n    timeout: 30m\n"
	if err := yaml.Unmarshal([]byte(src), &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.MaxTransferAttempts != 5 || cfg.BackoffBase != 2*time.Second || cfg.HTTP.Allow[0] != "storage.example.org" ||
		cfg.FileRoots[0].Path != "/srv/data" || cfg.FileRoots[1].access() != AccessWrite ||
		cfg.FileRoots[1].Principals[0] != "ann" || cfg.SSH.User != "stager" ||
		len(cfg.Plugins) != 1 || cfg.Plugins[0].Timeout != 30*time.Minute || cfg.Plugins[0].Schemes[1] != "ftp" || cfg.Plugins[0].Command[1] != "transfer-plugin" {
		t.Errorf("decoded %+v", cfg)
	}
	if err := cfg.Validate(); err != nil {
		t.Error(err)
	}
	cfg.HTTP.Deny = []string{"not a host/32x"}
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "http.deny[0]") {
		t.Errorf("bad deny entry: %v", err)
	}
}
