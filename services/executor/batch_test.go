package executor

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/pkg/sshx/sshtest"
	"github.com/gridwire/gridwire/pkg/target"
)

// countingShell counts the start scripts fed to a shell.
type countingShell struct {
	Shell
	feeds atomic.Int64
}

func (c *countingShell) Feed(ctx context.Context, script string) (target.Output, error) {
	c.feeds.Add(1)
	return c.Shell.Feed(ctx, script)
}

func (c *countingShell) Stream(ctx context.Context, script string, stdout func(string) io.Writer) (target.Output, error) {
	c.feeds.Add(1)
	return c.Shell.Stream(ctx, script, stdout)
}

// batchTarget is a batch target on this host that runs one start script at a time, so
// that tests decide what goes together.
func batchTarget() (*ScriptTarget, *countingShell) {
	sh := &countingShell{Shell: target.Local{}}
	return &ScriptTarget{Cluster: "hpc", Shells: []Shell{sh}, Batch: true, Sessions: 1, Poll: 10 * time.Millisecond}, sh
}

// inBothModes runs a test on a batch target (STARTs of a script at once) and on one
// whose STARTs run in turn (a fork-like profile's).
func inBothModes(t *testing.T, test func(t *testing.T, tg *ScriptTarget)) {
	for _, batch := range []bool{true, false} {
		t.Run(map[bool]string{true: "batch", false: "in-turn"}[batch], func(t *testing.T) {
			tg, _ := batchTarget()
			tg.Batch = batch
			test(t, tg)
		})
	}
}

// until polls cond; the bound only keeps a broken test from hanging.
func until(t testing.TB, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(2 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("waited for %s", what)
		}
	}
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// pendingStarts is how many starts wait in the queue of the target's only host.
func pendingStarts(tg *ScriptTarget) int {
	b := tg.batcher(tg.Shells[0])
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.pending)
}

// block occupies the target's start script with a job whose JOB script cannot be
// written until the returned func is called (it is a FIFO nobody reads yet), so that the
// starts that come meanwhile queue up and go together in the next script. It holds the
// script while it takes locks and launches STARTs, which a batch target's script does
// before it lets the next one begin. The func waits for the blocking job's start to end.
func block(t *testing.T, tg *ScriptTarget) (release func()) {
	t.Helper()
	wd := filepath.Join(t.TempDir(), events.NewID())
	if err := os.MkdirAll(filepath.Join(wd, events.ControlDir), 0o700); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(wd, events.ScriptFile)
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	inc := batchIncarnation(wd)
	inc.Scripts[events.ScriptStart] = events.Script{Body: "echo 1\n"}
	done := make(chan error, 1)
	go func() {
		_, err := tg.Start(context.Background(), events.State{JobID: filepath.Base(wd), Incarnation: &inc})
		done <- err
	}()
	until(t, "the blocking job's start script", func() bool { return exists(filepath.Join(wd, startLock)) })
	return func() {
		t.Helper()
		f, err := os.Open(fifo) // the script's write of the JOB script goes on
		if err != nil {
			t.Fatal(err)
		}
		_, err = io.Copy(io.Discard, f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil {
			t.Fatalf("blocking job: %v", err)
		}
	}
}

// startTogether starts the jobs in one start script: all of them queue while another
// script runs, then go at once.
func startTogether(t *testing.T, tg *ScriptTarget, sts []events.State) ([]events.StartedData, []error) {
	t.Helper()
	release := block(t, tg)
	runs, errs := make([]events.StartedData, len(sts)), make([]error, len(sts))
	var wg sync.WaitGroup
	for i, st := range sts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runs[i], errs[i] = tg.Start(context.Background(), st)
		}()
	}
	until(t, "every start queued", func() bool { return pendingStarts(tg) == len(sts) })
	release()
	wg.Wait()
	return runs, errs
}

func batchJobs(t *testing.T, n int) []events.State {
	root := t.TempDir()
	sts := make([]events.State, n)
	for i := range sts {
		wd := filepath.Join(root, events.NewID())
		sts[i] = events.State{JobID: filepath.Base(wd), Incarnation: ptr(batchIncarnation(wd))}
	}
	return sts
}

// Starts that come together on one host go in one script, and each gets its own run:
// N jobs, N submissions, N distinct native IDs, every JOB script written.
func TestBatchStartsManyJobsInOneScript(t *testing.T) {
	calls := fakeSbatch(t, "")
	tg, sh := batchTarget()
	sts := batchJobs(t, 24)
	runs, errs := startTogether(t, tg, sts)
	ids := map[string]bool{}
	for i, r := range runs {
		if errs[i] != nil {
			t.Fatalf("job %d: %v", i, errs[i])
		}
		if r.Adopted || r.Running || r.NativeID == "" {
			t.Errorf("job %d: %+v; want a fresh, queued submission", i, r)
		}
		ids[r.NativeID] = true
		script := filepath.Join(sts[i].Incarnation.WorkDir, events.ScriptFile)
		body, _ := os.ReadFile(script)
		if string(body) != sts[i].Incarnation.Scripts[events.ScriptJob].Body {
			t.Errorf("job %d: JOB script %q", i, body)
		}
		if fi, err := os.Stat(script); err != nil || fi.Mode().Perm()&0o077 != 0 {
			t.Errorf("job %d: JOB script open to others (%v)", i, err)
		}
	}
	if len(ids) != len(sts) || lines(t, calls) != len(sts) {
		t.Errorf("%d distinct native IDs, %d submissions; want %d of each", len(ids), lines(t, calls), len(sts))
	}
	if got := sh.feeds.Load(); got != 2 {
		t.Errorf("%d start scripts; want 2 (the blocking job's, then all %d together)", got, len(sts))
	}
}

// One job's failing START fails that job alone; its lock is released for a retry.
func TestBatchFailingStartFailsOnlyItsJob(t *testing.T) { inBothModes(t, failingStartFailsOnlyItsJob) }

func failingStartFailsOnlyItsJob(t *testing.T, tg *ScriptTarget) {
	calls := fakeSbatch(t, "")
	sts := batchJobs(t, 5)
	bad := sts[2].Incarnation
	good := bad.Scripts[events.ScriptStart]
	bad.Scripts[events.ScriptStart] = events.Script{Body: "echo 'sbatch: error: no such partition' >&2\nexit 3\n"}
	sts[1].Incarnation.Scripts[events.ScriptStart] = events.Script{Body: "if then fi (\n"} // a syntax error
	runs, errs := startTogether(t, tg, sts)
	for i := range sts {
		switch i {
		case 1:
			if errs[i] == nil || !strings.Contains(errs[i].Error(), "exit 2") {
				t.Errorf("job 1 (START does not parse): %v; want it failed alone", errs[i])
			}
		case 2:
			if errs[i] == nil || !strings.Contains(errs[i].Error(), "no such partition") || !strings.Contains(errs[i].Error(), "exit 3") {
				t.Errorf("job 2: %v; want START's error and status", errs[i])
			}
		default:
			if errs[i] != nil || runs[i].NativeID == "" {
				t.Errorf("job %d: %+v %v; want it started", i, runs[i], errs[i])
			}
		}
	}
	if lines(t, calls) != 3 {
		t.Errorf("%d submissions; want 3", lines(t, calls))
	}
	if exists(filepath.Join(bad.WorkDir, startLock)) {
		t.Error("the failed START kept its job's start lock")
	}
	bad.Scripts[events.ScriptStart] = good
	run, err := tg.Start(context.Background(), sts[2])
	if err != nil || run.Adopted || run.NativeID == "" {
		t.Fatalf("retry: %+v %v; want a fresh submission", run, err)
	}
}

// A job whose run is recorded beside it is adopted inside a batch, from the lock's
// status or from the status file an executor before batching wrote; nothing about it
// is rewritten, and only the others are submitted.
func TestBatchAdoptsRecordedRuns(t *testing.T) { inBothModes(t, adoptsRecordedRuns) }

func adoptsRecordedRuns(t *testing.T, tg *ScriptTarget) {
	calls := fakeSbatch(t, "")
	sts := batchJobs(t, 3)
	record := func(wd string, files map[string]string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Join(wd, events.ControlDir), 0o700); err != nil {
			t.Fatal(err)
		}
		for name, body := range files {
			if err := os.WriteFile(filepath.Join(wd, name), []byte(body), 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	current, legacy := sts[0].Incarnation.WorkDir, sts[1].Incarnation.WorkDir
	record(current, map[string]string{startLock: "4242\n" + statusLine + "0\n", events.ScriptFile: "the running job"})
	record(legacy, map[string]string{startLock: "", startRC: "0\n", startOut: "4343\n", events.ScriptFile: "the running job"})
	runs, errs := startTogether(t, tg, sts)
	for i, want := range []string{"4242", "4343"} {
		if errs[i] != nil || !runs[i].Adopted || runs[i].NativeID != want {
			t.Errorf("job %d: %+v %v; want run %s adopted", i, runs[i], errs[i], want)
		}
		if b, _ := os.ReadFile(filepath.Join(sts[i].Incarnation.WorkDir, events.ScriptFile)); string(b) != "the running job" {
			t.Errorf("job %d: the running job's script was rewritten: %q", i, b)
		}
	}
	if errs[2] != nil || runs[2].Adopted || lines(t, calls) != 1 {
		t.Errorf("job 2: %+v %v, %d submissions; want it alone submitted", runs[2], errs[2], lines(t, calls))
	}
	if b, _ := os.ReadFile(filepath.Join(legacy, startLock)); string(b) != "4343\n"+statusLine+"0\n" || exists(filepath.Join(legacy, startRC)) {
		t.Errorf("the old status file was not moved into the lock: lock %q", b)
	}
}

// Values that look like shell reach the target as literals: a JOB script, a working
// directory and a job ID full of quotes, command substitutions, backticks and newlines
// are written and passed exactly, and nothing in them runs.
func TestBatchWritesHostileValuesLiterally(t *testing.T) {
	inBothModes(t, writesHostileValuesLiterally)
}

func writesHostileValuesLiterally(t *testing.T, tg *ScriptTarget) {
	fakeSbatch(t, "")
	root := t.TempDir()
	canary := filepath.Join(root, "canary")
	evil := "'\"$(touch " + canary + ")`touch " + canary + "`\\\n$HOME ${x:-y} ;touch " + canary + "\n'"
	wd := filepath.Join(root, "a b"+evil)
	inc := batchIncarnation(wd)
	inc.Scripts[events.ScriptJob] = events.Script{Body: "#!/bin/sh\necho " + evil + "\n# no newline at the end" + evil}
	seen := filepath.Join(root, "seen")
	inc.Scripts[events.ScriptStart] = events.Script{Body: "printf '%s|%s' \"$GW_JOB_ID\" \"$GW_WORKDIR\" > '" + seen + "'\necho 7\n"}
	sts := append(batchJobs(t, 2), events.State{JobID: "job" + evil, Incarnation: &inc})
	runs, errs := startTogether(t, tg, sts)
	for i := range sts {
		if errs[i] != nil || runs[i].NativeID == "" {
			t.Fatalf("job %d: %+v %v", i, runs[i], errs[i])
		}
	}
	if b, _ := os.ReadFile(filepath.Join(wd, events.ScriptFile)); string(b) != inc.Scripts[events.ScriptJob].Body {
		t.Errorf("JOB script %q; want %q", b, inc.Scripts[events.ScriptJob].Body)
	}
	if b, _ := os.ReadFile(seen); string(b) != "job"+evil+"|"+wd {
		t.Errorf("START saw %q", b)
	}
	if exists(canary) {
		t.Fatal("a value ran as shell")
	}
}

// A start that waits in the queue and is given up is taken out: it never runs.
func TestBatchCancelledWaitingStartNeverRuns(t *testing.T) {
	calls := fakeSbatch(t, "")
	tg, sh := batchTarget()
	st := batchJobs(t, 1)[0]
	release := block(t, tg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := tg.Start(ctx, st)
		done <- err
	}()
	until(t, "the start queued", func() bool { return pendingStarts(tg) == 1 })
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled start: %v", err)
	}
	if n := pendingStarts(tg); n != 0 {
		t.Errorf("%d starts still queued after the only one was given up", n)
	}
	release()
	b := tg.batcher(tg.Shells[0])
	until(t, "the batcher idle", func() bool { b.mu.Lock(); defer b.mu.Unlock(); return b.loops == 0 })
	if exists(filepath.Join(st.Incarnation.WorkDir, startLock)) || lines(t, calls) != 0 || sh.feeds.Load() != 1 {
		t.Errorf("the cancelled job was started (%d submissions, %d scripts)", lines(t, calls), sh.feeds.Load())
	}
}

// A value a shell word cannot carry is refused before anything runs.
func TestBatchRefusesNUL(t *testing.T) {
	tg, sh := batchTarget()
	st := batchJobs(t, 1)[0]
	st.Incarnation.Scripts[events.ScriptJob] = events.Script{Body: "#!/bin/sh\necho a\x00b\n"}
	if _, err := tg.Start(context.Background(), st); !errors.Is(err, errNUL) || sh.feeds.Load() != 0 {
		t.Fatalf("start: %v after %d scripts; want the NUL refused", err, sh.feeds.Load())
	}
}

// Only the script's own markers split the output: START's output that imitates them
// (without the script's nonce) stays START's, and a job cut off is reported as such.
func TestParseStartKeepsImitationsAsOutput(t *testing.T) {
	out := "gw:n1:0:ran 0\n123\ngw:other:0:end\ngw:n1:0:stderr\nwarning\ngw:n1:0:end\ngw:n1:1:busy\ngw:n1:2:done 0\n9\n"
	v, ok := parseStart("n1", []byte(out), 4)
	if !ok[0] || v[0].verdict != "ran" || string(v[0].out) != "123\ngw:other:0:end\n" || string(v[0].errOut) != "warning\n" {
		t.Errorf("job 0: %+v %v", v[0], ok[0])
	}
	if !ok[1] || v[1].verdict != "busy" || ok[2] || ok[3] {
		t.Errorf("jobs 1-3: %+v %v; want busy, then two without a verdict", v[1:], ok[1:])
	}
}

// Over SSH, starts that come together share one session, and every job runs once.
func TestSSHTargetStartsABatchInOneSession(t *testing.T) {
	srv := sshtest.NewServer(t)
	tg := sshTarget(t, sshCluster(srv, srv.KnownHostsFile))
	sh := &countingShell{Shell: tg.Shells[0]}
	tg.Shells[0], tg.Sessions = sh, 1
	root := t.TempDir()
	runsFile := filepath.Join(root, "runs")
	sts := make([]events.State, 12)
	for i := range sts {
		wd := filepath.Join(root, events.NewID())
		sts[i] = events.State{JobID: filepath.Base(wd), Incarnation: ptr(forkIncarnation("remote", wd, "echo run >> "+runsFile))}
	}
	runs, errs := startTogether(t, tg, sts)
	pids := map[string]bool{}
	for i, r := range runs {
		if errs[i] != nil || r.Adopted || !r.Running || r.HostKey != srv.HostKeyFingerprint {
			t.Fatalf("job %d: %+v %v", i, r, errs[i])
		}
		pids[r.NativeID] = true
		waitFile(t, filepath.Join(sts[i].Incarnation.WorkDir, events.ExitFile))
	}
	b, _ := os.ReadFile(runsFile)
	if len(pids) != len(sts) || bytes.Count(b, []byte("run\n")) != len(sts) {
		t.Errorf("%d distinct native IDs, %d runs; want %d of each", len(pids), bytes.Count(b, []byte("run\n")), len(sts))
	}
	if sh.feeds.Load() != 2 || srv.Execs() != 2 {
		t.Errorf("%d start scripts in %d sessions; want 2 and 2", sh.feeds.Load(), srv.Execs())
	}
}

// A START that hangs holds its script no longer than StaleLock (after which another
// attempt would take its lock over anyway): the caller gets an error, not a wait
// without end, and nothing is reported as started.
func TestBatchHungStartIsBounded(t *testing.T) {
	inBothModes(t, func(t *testing.T, tg *ScriptTarget) {
		dir := t.TempDir()
		gate := filepath.Join(dir, "gate")
		// The hung START ends on the gate, or when the directory goes: the gate lives for an
		// instant before the test removes its temporary directories, and a loop that missed
		// it would spin on after the test, as dozens did.
		t.Cleanup(func() { os.WriteFile(gate, nil, 0o644) })
		tg.StaleLock = 200 * time.Millisecond
		st := batchJobs(t, 1)[0]
		st.Incarnation.Scripts[events.ScriptStart] = events.Script{Body: "while [ -d '" + dir + "' ] && [ ! -e '" + gate + "' ]; do sleep 0.01; done\necho 1\n"}
		run, err := tg.Start(context.Background(), st)
		if err == nil {
			t.Fatalf("a hung START reported %+v", run)
		}
	})
}

// Two deliveries of one job in one script start it once: the second finds the first's
// run under the lock and adopts it.
func TestBatchSameJobTwiceStartsOnce(t *testing.T) {
	inBothModes(t, func(t *testing.T, tg *ScriptTarget) {
		calls := fakeSbatch(t, "")
		st := batchJobs(t, 1)[0]
		runs, errs := startTogether(t, tg, []events.State{st, st})
		if errs[0] != nil || errs[1] != nil || runs[0].NativeID != runs[1].NativeID || runs[0].Adopted == runs[1].Adopted {
			t.Fatalf("%+v %v; want one run and its adoption", runs, errs)
		}
		if lines(t, calls) != 1 {
			t.Errorf("%d submissions; want 1", lines(t, calls))
		}
	})
}

// A start script larger than the system's limit on one argument (128 KiB on Linux)
// still runs, here and over SSH: it goes in on the shell's standard input.
func TestBatchScriptBeyondTheArgumentLimit(t *testing.T) {
	srv := sshtest.NewServer(t)
	for name, tg := range map[string]*ScriptTarget{
		"local": {Cluster: "hpc", Shells: []Shell{target.Local{}}, Batch: true},
		"ssh":   sshTarget(t, sshCluster(srv, srv.KnownHostsFile)),
	} {
		t.Run(name, func(t *testing.T) {
			fakeSbatch(t, "")
			st := batchJobs(t, 1)[0]
			body := "#!/bin/sh\n" + strings.Repeat("# "+strings.Repeat("x", 98)+"\n", 3000) + "true\n"
			st.Incarnation.Scripts[events.ScriptJob] = events.Script{Body: body}
			st.Incarnation.Scripts[events.ScriptStart] = events.Script{Body: "echo 31\n"}
			run, err := tg.Start(context.Background(), st)
			if err != nil || run.NativeID != "31" {
				t.Fatalf("start: %+v %v", run, err)
			}
			if b, _ := os.ReadFile(filepath.Join(st.Incarnation.WorkDir, events.ScriptFile)); string(b) != body {
				t.Errorf("JOB script of %d bytes, want %d", len(b), len(body))
			}
		})
	}
}

// gatedJob is a batch job whose START waits for the returned gate file before it
// submits.
func gatedJob(t *testing.T, st events.State) (events.State, string) {
	gate := filepath.Join(t.TempDir(), "gate")
	t.Cleanup(func() { os.WriteFile(gate, nil, 0o644) }) // a START never outlives its test
	inc := *st.Incarnation
	inc.Scripts = map[string]events.Script{events.ScriptJob: inc.Scripts[events.ScriptJob],
		events.ScriptStart: {Body: "while [ ! -e '" + gate + "' ]; do sleep 0.005; done\n" + inc.Scripts[events.ScriptStart].Body}}
	st.Incarnation = &inc
	return st, gate
}

// startAsync starts st and returns where its outcome will come.
func startAsync(tg *ScriptTarget, st events.State) <-chan error {
	done := make(chan error, 1)
	go func() {
		_, err := tg.Start(context.Background(), st)
		done <- err
	}()
	return done
}

// outcome waits for a start's outcome; the bound only keeps a broken test from hanging.
func outcome(t *testing.T, what string, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(30 * time.Second):
		t.Fatalf("waited for %s", what)
		return nil
	}
}

// A job of a script is handed its verdict as soon as the script has reported it, not
// when the script's last START has ended: here the second job's START waits until the
// first job's start has returned, which only a streamed verdict allows.
func TestBatchReportsEachJobAsItsStartEnds(t *testing.T) {
	inBothModes(t, func(t *testing.T, tg *ScriptTarget) {
		calls := fakeSbatch(t, "")
		sts := batchJobs(t, 2)
		slow, gate := gatedJob(t, sts[1])
		release := block(t, tg)
		first := startAsync(tg, sts[0])
		until(t, "the first start queued", func() bool { return pendingStarts(tg) == 1 })
		second := startAsync(tg, slow)
		until(t, "both starts queued", func() bool { return pendingStarts(tg) == 2 })
		go release()
		if err := outcome(t, "the first job's start", first); err != nil {
			t.Fatalf("first job: %v", err)
		}
		if exists(gate) {
			t.Fatal("the slow START was let go before the first job's start returned")
		}
		os.WriteFile(gate, nil, 0o644)
		if err := <-second; err != nil {
			t.Fatalf("second job: %v", err)
		}
		if lines(t, calls) != 2 {
			t.Errorf("%d submissions; want 2", lines(t, calls))
		}
	})
}

// On a batch target a script that has launched every START lets the next script
// begin: with one script at a time, a job that comes while an earlier job's START
// still runs is started (in a script of its own) before that START ends.
func TestBatchNextScriptBeginsOnceStartsAreLaunched(t *testing.T) {
	calls := fakeSbatch(t, "")
	tg, sh := batchTarget()
	sts := batchJobs(t, 2)
	slow, gate := gatedJob(t, sts[0])
	first := startAsync(tg, slow)
	until(t, "the slow START under way", func() bool { return exists(filepath.Join(slow.Incarnation.WorkDir, startLock)) })
	if err := outcome(t, "the second job's start", startAsync(tg, sts[1])); err != nil {
		t.Fatalf("second job: %v", err)
	}
	os.WriteFile(gate, nil, 0o644)
	if err := <-first; err != nil {
		t.Fatalf("slow job: %v", err)
	}
	if lines(t, calls) != 2 || sh.feeds.Load() != 2 {
		t.Errorf("%d submissions in %d scripts; want 2 in 2", lines(t, calls), sh.feeds.Load())
	}
}

// The reader of a start script's output hands each job its verdict once, as soon as it
// is whole, whatever pieces the output comes in: a started job at its end line, a
// failed START once its lock is released (or the output ends), a job the script could
// not start at its line; and says when every START is launched.
func TestStartReaderTellsEachJobOnceWhenWhole(t *testing.T) {
	out := "gw:n1:1:busy\ngw:n1:0:ran 0\n12;hpc\ngw:n1:0:stderr\nwarn\ngw:n1:0:end\ngw:n1:all:launched\n" +
		"gw:n1:2:ran 1\ngw:n1:2:stderr\nbad\ngw:n1:2:end\ngw:n1:2:released\ngw:n1:3:done 1\ngw:n1:3:stderr\ngw:n1:3:end\ngw:n1:0:end\n"
	var told []string
	launchedAt := -1
	var r *startReader
	r = newStartReader("n1", 5, func(k int) {
		v := r.verdicts[k]
		told = append(told, fmt.Sprintf("%d %s %d %q %q", k, v.verdict, v.rc, v.out, v.errOut))
	}, func() { launchedAt = len(told) })
	for i := range len(out) { // a byte at a time: lines are whole only at their newline
		r.Write([]byte{out[i]})
	}
	want := []string{`1 busy 0 "" ""`, `0 ran 0 "12;hpc\n" "warn\n"`, `2 ran 1 "" "bad\n"`}
	if !slices.Equal(want, told) || launchedAt != 2 {
		t.Fatalf("before the end: told %q, want %q; launched after %d verdicts, want 2", told, want, launchedAt)
	}
	r.Close()
	r.Write([]byte("gw:n1:4:busy\n"))
	want = append(want, `3 done 1 "" ""`)
	if !slices.Equal(want, told) || r.ok[4] {
		t.Errorf("after the end: told %q, want %q; job 4 ok %v, want no verdict", told, want, r.ok[4])
	}
}

// However slow the batch server, one host runs at most maxScriptsInFlight start scripts
// at once: with that many scripts each waiting for a START it launched, the next job's
// script begins only once one of them has ended.
func TestBatchBoundsTheScriptsInFlight(t *testing.T) {
	fakeSbatch(t, "")
	tg, sh := batchTarget()
	sts := batchJobs(t, maxScriptsInFlight+1)
	gates := make([]string, maxScriptsInFlight)
	done := make([]<-chan error, maxScriptsInFlight)
	for i := range gates { // one script each: each comes once the last has launched its START
		var slow events.State
		slow, gates[i] = gatedJob(t, sts[i])
		done[i] = startAsync(tg, slow)
		until(t, "a slow START under way", func() bool { return exists(filepath.Join(slow.Incarnation.WorkDir, startLock)) })
	}
	last := sts[maxScriptsInFlight]
	next := startAsync(tg, last)
	until(t, "the next job taken", func() bool { return pendingStarts(tg) == 0 })
	time.Sleep(5 * launchLinger) // time enough for a script to begin, were one allowed
	if n := sh.feeds.Load(); n != maxScriptsInFlight || exists(filepath.Join(last.Incarnation.WorkDir, startLock)) {
		t.Fatalf("%d scripts began while %d waited for their STARTs; want none beyond them", n, maxScriptsInFlight)
	}
	os.WriteFile(gates[0], nil, 0o644)
	if err := outcome(t, "the next job's start", next); err != nil {
		t.Fatalf("next job: %v", err)
	}
	for i, g := range gates {
		os.WriteFile(g, nil, 0o644)
		if err := outcome(t, "a slow job's start", done[i]); err != nil {
			t.Fatalf("slow job %d: %v", i, err)
		}
	}
}
