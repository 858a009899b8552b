package executor

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/pkg/target"
)

// fakeSbatch puts an sbatch on PATH that counts its calls in calls, waits for the file
// gate to exist when one is named, and prints "ID;cluster" (ID: the call's number
// followed by 000); exit status 1 while the file "refuse" exists beside calls.
func fakeSbatch(t *testing.T, gate string) (calls string) {
	t.Helper()
	bin := t.TempDir()
	calls = filepath.Join(bin, "calls")
	body := "#!/bin/sh\n"
	if gate != "" {
		body += "while [ ! -e '" + gate + "' ]; do sleep 0.01; done\n"
	}
	// Submissions of one batch run at once: the count is taken under a lock (mkdir).
	body += "if [ -e '" + bin + "/refuse' ]; then echo 'sbatch: error: invalid partition' >&2; exit 1; fi\n" +
		"until mkdir '" + bin + "/lock' 2>/dev/null; do sleep 0.001; done\n" +
		"echo x >> '" + calls + "'\nn=$(wc -l < '" + calls + "' | tr -d ' ')\nrmdir '" + bin + "/lock'\necho \"${n}000;hpc\"\n"
	if err := os.WriteFile(filepath.Join(bin, "sbatch"), []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+":"+os.Getenv("PATH"))
	return calls
}

// batchIncarnation submits the job script with sbatch, as the slurm profile does.
func batchIncarnation(wd string) events.IncarnatedData {
	return events.IncarnatedData{Cluster: "hpc", Profile: "slurm", WorkDir: wd, NativeIDPattern: `^\s*([0-9]+)(?:;\S*)?\s*$`,
		Scripts: map[string]events.Script{
			events.ScriptJob:   {Body: jobScript(wd, "true")},
			events.ScriptStart: {Body: "set -f\nexec sbatch --parsable --chdir=\"$GW_WORKDIR\" \"$GW_WORKDIR\"/.gridwire/job.sh\n"},
		}}
}

func lines(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	return strings.Count(string(b), "\n")
}

// START's output gives the native ID with the profile's pattern; a batch job is queued,
// not running, when it starts.
func TestBatchTargetParsesTheNativeID(t *testing.T) {
	calls := fakeSbatch(t, "")
	tg := &ScriptTarget{Cluster: "hpc", Shells: []Shell{target.Local{}}, Batch: true}
	wd := filepath.Join(t.TempDir(), events.NewID())
	run, err := tg.Start(context.Background(), events.State{JobID: filepath.Base(wd), Incarnation: ptr(batchIncarnation(wd))})
	if err != nil {
		t.Fatal(err)
	}
	if run.NativeID != "1000" || run.Running || run.Adopted || run.Cluster != "hpc" {
		t.Errorf("started %+v; want native ID 1000, queued, not adopted", run)
	}
	if b, _ := os.ReadFile(filepath.Join(wd, events.ScriptFile)); !strings.Contains(string(b), "GW_EXIT") {
		t.Errorf("the JOB script was not written before START: %q", b)
	}
	if lines(t, calls) != 1 {
		t.Errorf("sbatch ran %d times", lines(t, calls))
	}
}

// An executor that died after START ran but before the started event landed leaves the
// run recorded beside the job: the next attempt adopts it and submits nothing.
func TestBatchTargetAdoptsAfterACrash(t *testing.T) {
	calls := fakeSbatch(t, "")
	wd := filepath.Join(t.TempDir(), events.NewID())
	st := events.State{JobID: filepath.Base(wd), Incarnation: ptr(batchIncarnation(wd))}
	first := &ScriptTarget{Cluster: "hpc", Shells: []Shell{target.Local{}}, Batch: true}
	if _, err := first.Start(context.Background(), st); err != nil {
		t.Fatal(err)
	}
	// The first executor is gone; another process takes the job over.
	second := &ScriptTarget{Cluster: "hpc", Shells: []Shell{target.Local{}}, Batch: true}
	run, err := second.Start(context.Background(), st)
	if err != nil {
		t.Fatal(err)
	}
	if !run.Adopted || run.NativeID != "1000" {
		t.Errorf("takeover %+v; want the first submission adopted", run)
	}
	if lines(t, calls) != 1 {
		t.Errorf("sbatch ran %d times", lines(t, calls))
	}
}

// Attempts racing on one job submit it once: the others wait for the start lock's
// holder and adopt its run.
func TestBatchTargetConcurrentStartsSubmitOnce(t *testing.T) {
	gate := filepath.Join(t.TempDir(), "go")
	calls := fakeSbatch(t, gate)
	wd := filepath.Join(t.TempDir(), events.NewID())
	st := events.State{JobID: filepath.Base(wd), Incarnation: ptr(batchIncarnation(wd))}
	var wg sync.WaitGroup
	runs := make([]events.StartedData, 4)
	errs := make([]error, 4)
	for i := range runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tg := &ScriptTarget{Cluster: "hpc", Shells: []Shell{target.Local{}}, Batch: true, Poll: 10 * time.Millisecond}
			runs[i], errs[i] = tg.Start(context.Background(), st)
		}()
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if _, err := os.Stat(filepath.Join(wd, startLock)); err == nil {
			break // someone holds the lock
		}
		if time.Now().After(deadline) {
			t.Fatal("no attempt took the start lock")
		}
	}
	if err := os.WriteFile(gate, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	adopted := 0
	for i, r := range runs {
		if errs[i] != nil {
			t.Fatalf("attempt %d: %v", i, errs[i])
		}
		if r.NativeID != "1000" {
			t.Errorf("attempt %d: native ID %q", i, r.NativeID)
		}
		if r.Adopted {
			adopted++
		}
	}
	if adopted != 3 || lines(t, calls) != 1 {
		t.Errorf("%d adopted, sbatch ran %d times; want 3 and 1", adopted, lines(t, calls))
	}
}

// A START that fails is reported with its error output and leaves the job free to be
// started again.
func TestBatchTargetFailedStartIsRetried(t *testing.T) {
	calls := fakeSbatch(t, "")
	refuse := filepath.Join(filepath.Dir(calls), "refuse")
	os.WriteFile(refuse, nil, 0o644)
	wd := filepath.Join(t.TempDir(), events.NewID())
	st := events.State{JobID: filepath.Base(wd), Incarnation: ptr(batchIncarnation(wd))}
	tg := &ScriptTarget{Cluster: "hpc", Shells: []Shell{target.Local{}}, Batch: true}
	_, err := tg.Start(context.Background(), st)
	if err == nil || !strings.Contains(err.Error(), "invalid partition") {
		t.Fatalf("start: %v; want sbatch's error", err)
	}
	os.Remove(refuse)
	run, err := tg.Start(context.Background(), st)
	if err != nil || run.Adopted || run.NativeID != "1000" {
		t.Fatalf("retry: %+v %v; want a fresh submission", run, err)
	}
}

// Output that the pattern does not match is an error naming the output.
func TestBatchTargetRefusesUnparsableOutput(t *testing.T) {
	wd := filepath.Join(t.TempDir(), events.NewID())
	inc := batchIncarnation(wd)
	inc.Scripts[events.ScriptStart] = events.Script{Body: "echo 'Submitted batch job'"}
	tg := &ScriptTarget{Cluster: "hpc", Shells: []Shell{target.Local{}}, Batch: true}
	_, err := tg.Start(context.Background(), events.State{JobID: filepath.Base(wd), Incarnation: &inc})
	if err == nil || !strings.Contains(err.Error(), "Submitted batch job") {
		t.Fatalf("start: %v; want the unparsable output named", err)
	}
}

// Runtime values reach scripts quoted: a working directory full of shell syntax is one word.
func TestScriptVariablesAreQuoted(t *testing.T) {
	dir := filepath.Join(t.TempDir(), `a b'$(touch pwned)"`)
	out, err := target.Local{}.Run(context.Background(), target.WithVars(map[string]string{events.VarWorkDir: dir}, `printf '%s' "$GW_WORKDIR"`))
	if err != nil || string(out.Stdout) != dir {
		t.Fatalf("got %q %v, want %q", out.Stdout, err, dir)
	}
	if _, err := os.Stat("pwned"); err == nil {
		t.Fatal("a value ran as shell")
	}
}

// A PBS START prints "ID.server"; the profile's pattern keeps the whole of it as the
// native ID, which HOLD then gets as $GW_NATIVE_ID.
func TestBatchTargetPBSNativeIDAndControl(t *testing.T) {
	bin := t.TempDir()
	rec := filepath.Join(bin, "rec")
	for name, body := range map[string]string{
		"qsub":  "echo '4242.pbs-server'",
		"qhold": "echo \"qhold $*\" > '" + rec + "'",
	} {
		if err := os.WriteFile(filepath.Join(bin, name), []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PATH", bin+":"+os.Getenv("PATH"))
	wd := filepath.Join(t.TempDir(), events.NewID())
	inc := events.IncarnatedData{Cluster: "pbs", WorkDir: wd, NativeIDPattern: `^\s*([0-9]+(?:\.[A-Za-z0-9._-]+)?)\s*$`,
		Scripts: map[string]events.Script{
			events.ScriptJob:   {Body: jobScript(wd, "true")},
			events.ScriptStart: {Body: "cd \"$GW_WORKDIR\" || exit 1\nexec qsub \"$GW_WORKDIR\"/.gridwire/job.sh\n"},
			events.ScriptHold:  {Body: "qhold \"$GW_NATIVE_ID\""},
		}}
	tg := &ScriptTarget{Cluster: "pbs", Shells: []Shell{target.Local{}}, Batch: true}
	st := events.State{JobID: filepath.Base(wd), Incarnation: &inc}
	run, err := tg.Start(context.Background(), st)
	if err != nil || run.NativeID != "4242.pbs-server" {
		t.Fatalf("start: %+v %v; want native ID 4242.pbs-server", run, err)
	}
	st.NativeID, st.Host = run.NativeID, run.Host
	if out, err := tg.Control(context.Background(), st, events.ScriptHold); err != nil || !out.OK() {
		t.Fatalf("HOLD: %v %s", err, out.Describe())
	}
	if b, _ := os.ReadFile(rec); string(b) != "qhold 4242.pbs-server\n" {
		t.Errorf("HOLD ran %q", b)
	}
	// A profile without the script: recorded as a failed action, not retried forever.
	if out, err := tg.Control(context.Background(), st, events.ScriptResume); err != nil || out.OK() || !strings.Contains(out.Describe(), "no RESUME script") {
		t.Errorf("RESUME without a script: %v %s", err, out.Describe())
	}
}

// A start lock left without a recorded result for longer than StaleLock belongs to an
// attempt that died before START finished: it is moved aside and the job started.
// A younger one is waited for.
func TestBatchTargetTakesOverAStaleLock(t *testing.T) {
	calls := fakeSbatch(t, "")
	wd := filepath.Join(t.TempDir(), events.NewID())
	lock := filepath.Join(wd, startLock)
	if err := os.MkdirAll(filepath.Dir(lock), 0o700); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(lock, nil, 0o600)
	st := events.State{JobID: filepath.Base(wd), Incarnation: ptr(batchIncarnation(wd))}
	tg := &ScriptTarget{Cluster: "hpc", Shells: []Shell{target.Local{}}, Batch: true, StaleLock: time.Minute, Poll: 10 * time.Millisecond}

	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if _, err := tg.Start(ctx, st); err == nil {
		t.Fatal("a fresh lock without a result was not waited for")
	}
	if lines(t, calls) != 0 {
		t.Fatal("START ran under another attempt's lock")
	}
	old := time.Now().Add(-3 * time.Minute)
	os.Chtimes(lock, old, old)
	// The first call's script goes on for a grace period after its caller left, still
	// waiting on the lock: either it or this call takes the stale lock over, and the
	// other finds that run. Either way START runs exactly once.
	run, err := tg.Start(context.Background(), st)
	if err != nil || run.NativeID != "1000" || lines(t, calls) != 1 {
		t.Fatalf("after the lock went stale: %+v %v, %d submissions; want one submission", run, err, lines(t, calls))
	}
	if m, _ := filepath.Glob(lock + ".abandoned-*"); len(m) != 1 {
		t.Errorf("the stale lock was not kept aside: %v", m)
	}
}
