package watcher

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/pkg/cluster"
	"github.com/gridwire/gridwire/pkg/sshx/sshtest"
	"github.com/gridwire/gridwire/pkg/target"
)

// statusScript lists native states as a batch system would, from a file per native ID
// (<dir>/<id>.state); IDs without one are absent.
func statusScript(dir string) string {
	return `for id in $GW_NATIVE_IDS; do
  [ -f '` + dir + `'/"$id".state ] && echo "$id $(cat '` + dir + `'/"$id".state)"
done
exit 0`
}

// batchInc is an incarnation with Slurm-like patterns and state table.
func batchInc(wd, status string) *events.IncarnatedData {
	return &events.IncarnatedData{Cluster: "hpc", WorkDir: wd, StatusPattern: `^(?P<id>[0-9]+) (?P<state>[A-Z_]+)$`,
		NativeStates: map[string]string{"PENDING": "QUEUED", "RUNNING": "RUNNING", "HELD": "HELD", "COMPLETED": "ENDED"},
		AbsentState:  "ENDED",
		Scripts:      map[string]events.Script{events.ScriptStatus: {Body: status}}}
}

type countingRunner struct {
	Runner
	calls *atomic.Int32
}

func (c countingRunner) Run(ctx context.Context, script string) (target.Output, error) {
	c.calls.Add(1)
	return c.Runner.Run(ctx, script)
}

type probeFixture struct {
	dir    string
	states map[string]events.State
	calls  atomic.Int32
}

func newProbeFixture(t *testing.T) *probeFixture {
	return &probeFixture{dir: t.TempDir(), states: map[string]events.State{}}
}

// job adds a job with a native ID, its native state (none: absent) and exit code (<0: none).
func (f *probeFixture) job(t *testing.T, id, native, state string, exit int, status string) Watched {
	t.Helper()
	wd := filepath.Join(f.dir, id)
	if err := os.MkdirAll(filepath.Join(wd, events.ControlDir), 0o700); err != nil {
		t.Fatal(err)
	}
	if state != "" {
		os.WriteFile(filepath.Join(f.dir, native+".state"), []byte(state), 0o600)
	}
	if exit >= 0 {
		os.WriteFile(filepath.Join(wd, events.ExitFile), []byte(strconv.Itoa(exit)+"\n"), 0o600)
	}
	f.states[id] = events.State{JobID: id, NativeID: native, Host: "h1", Incarnation: batchInc(wd, status)}
	return Watched{JobID: id, Cluster: "hpc", NativeID: native, WorkDir: wd}
}

func (f *probeFixture) prober(cap int) *ScriptProber {
	return &ScriptProber{Cluster: "hpc", MaxCallsPerMinute: cap,
		Lookup: func(_ context.Context, id string) (events.State, error) {
			st, ok := f.states[id]
			if !ok {
				return st, events.ErrNotFound
			}
			return st, nil
		},
		Runner: func(string) Runner { return countingRunner{target.Local{}, &f.calls} }}
}

// One call asks about every job; native states map through the profile's table; the
// exit status file decides an exit; a job the LRMS no longer lists without an exit
// status is gone.
func TestScriptProberMapsStatesInOneCall(t *testing.T) {
	f := newProbeFixture(t)
	status := statusScript(f.dir)
	jobs := []Watched{
		f.job(t, "J1", "101", "PENDING", -1, status),
		f.job(t, "J2", "102", "RUNNING", -1, status),
		f.job(t, "J3", "103", "HELD", -1, status),
		f.job(t, "J4", "104", "COMPLETED", 3, status),
		f.job(t, "J5", "105", "", 0, status),
		f.job(t, "J6", "106", "", -1, status),
		f.job(t, "J7", "107", "NODE_WEIRD", -1, status),
	}
	got, err := f.prober(0).Probe(context.Background(), jobs)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]Observation{
		"J1": {State: events.StatusQueued, NativeState: "PENDING"},
		"J2": {State: events.StatusRunning, NativeState: "RUNNING"},
		"J3": {State: events.StatusHeld, NativeState: "HELD"},
		"J4": {Exited: true, ExitCode: 3, NativeState: "COMPLETED"},
		"J5": {Exited: true, ExitCode: 0},
		"J6": {Gone: true},
		"J7": {NativeState: "NODE_WEIRD"},
	}
	for id, w := range want {
		if got[id] != w {
			t.Errorf("%s: %+v, want %+v", id, got[id], w)
		}
	}
	if n := f.calls.Load(); n != 1 {
		t.Errorf("%d calls for %d jobs, want 1", n, len(jobs))
	}
}

// A poll of more jobs than one call may carry is split into calls of at most
// MaxJobsPerCall, and every job is still observed.
func TestScriptProberSplitsLargePolls(t *testing.T) {
	f := newProbeFixture(t)
	status := statusScript(f.dir)
	var jobs []Watched
	for i := range 5 {
		id, native := "J"+strconv.Itoa(i), strconv.Itoa(100+i)
		jobs = append(jobs, f.job(t, id, native, "RUNNING", -1, status))
	}
	p := f.prober(0)
	p.MaxJobsPerCall = 2
	got, err := p.Probe(context.Background(), jobs)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range jobs {
		if want := (Observation{State: events.StatusRunning, NativeState: "RUNNING"}); got[w.JobID] != want {
			t.Errorf("%s: %+v, want %+v", w.JobID, got[w.JobID], want)
		}
	}
	if n := f.calls.Load(); n != 3 {
		t.Errorf("%d calls for 5 jobs at 2 a call, want 3", n)
	}
}

// A status call that fails is an error, never an invented state.
func TestScriptProberFailedCallIsAnError(t *testing.T) {
	f := newProbeFixture(t)
	w := f.job(t, "J1", "101", "RUNNING", -1, "echo 'squeue: error: slurm_load_jobs error: Unable to contact slurm controller'; exit 1")
	got, err := f.prober(0).Probe(context.Background(), []Watched{w})
	if err == nil || !strings.Contains(err.Error(), "Unable to contact") {
		t.Fatalf("probe: %v %v; want an error naming the failure", got, err)
	}
}

// Native IDs reach the status script as one variable of words, never as shell text.
func TestScriptProberQuotesNativeIDs(t *testing.T) {
	f := newProbeFixture(t)
	marker := filepath.Join(f.dir, "pwned")
	w := f.job(t, "J1", "1;touch "+marker, "", -1, statusScript(f.dir))
	if _, err := f.prober(0).Probe(context.Background(), []Watched{w}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("a native ID ran as shell")
	}
}

// The ceiling on calls per minute makes a poll wait its turn; a poll whose context
// ends meanwhile makes no call.
func TestScriptProberCallCeiling(t *testing.T) {
	f := newProbeFixture(t)
	w := f.job(t, "J1", "101", "RUNNING", -1, statusScript(f.dir))
	p := f.prober(1)
	if _, err := p.Probe(context.Background(), []Watched{w}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := p.Probe(ctx, []Watched{w}); !errors.Is(err, context.Canceled) {
		t.Fatalf("second probe within the minute: %v; want it to wait (and give up with its context)", err)
	}
	if n := f.calls.Load(); n != 1 {
		t.Errorf("%d calls, want 1 under a ceiling of 1 per minute", n)
	}
}

// Static scripts the status call needs are installed where the plan says when missing.
func TestScriptProberInstallsStaticScripts(t *testing.T) {
	f := newProbeFixture(t)
	loc := filepath.Join(f.dir, "bin", "gw-status-0011223344556677")
	w := f.job(t, "J1", "101", "RUNNING", -1, "/bin/sh "+loc+" $GW_NATIVE_IDS")
	inc := f.states["J1"].Incarnation
	inc.StaticScripts = map[string]events.Script{"gw-status": {Body: "#!/bin/sh\nfor i; do echo \"$i RUNNING\"; done\n", Location: loc}}
	got, err := f.prober(0).Probe(context.Background(), []Watched{w})
	if err != nil {
		t.Fatal(err)
	}
	if got["J1"].State != events.StatusRunning {
		t.Errorf("observation %+v; want RUNNING from the installed static script", got["J1"])
	}
	if fi, err := os.Stat(loc); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("static script: %v %v", fi, err)
	}
}

// Each kind of cluster gets its prober, with the call ceiling for its kind unless the
// operator set one.
func TestNewProberByKind(t *testing.T) {
	lookup := func(context.Context, string) (events.State, error) { return events.State{}, nil }
	if p, _, err := NewProber(cluster.LocalFork(), lookup, 0, nil); err != nil || p != (ForkProber{}) {
		t.Errorf("local fork cluster: %T %v", p, err)
	}
	slurm := cluster.Cluster{Name: "hpc", Kind: cluster.KindFork, Profile: "slurm", LRMS: "Slurm"}
	p, _, err := NewProber(slurm, lookup, 0, nil)
	if sp, ok := p.(*ScriptProber); err != nil || !ok || sp.MaxCallsPerMinute != DefaultBatchCallsPerMinute {
		t.Errorf("batch cluster: %#v %v", p, err)
	}
	p, _, err = NewProber(slurm, lookup, 6, nil)
	if sp, ok := p.(*ScriptProber); err != nil || !ok || sp.MaxCallsPerMinute != 6 {
		t.Errorf("batch cluster with a ceiling of 6: %#v %v", p, err)
	}
	srv := sshtest.NewServer(t)
	remote := cluster.Cluster{Name: "remote", Kind: cluster.KindSSH, Hosts: []string{srv.Addr}, User: "u",
		Identity: srv.ClientKeyFile, KnownHosts: srv.KnownHostsFile, Profile: "fork", LRMS: "Fork"}
	p, closeFn, err := NewProber(remote, lookup, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer closeFn()
	if sp, ok := p.(*ScriptProber); !ok || sp.MaxCallsPerMinute != DefaultHostCallsPerMinute {
		t.Errorf("ssh cluster: %#v", p)
	}
}
