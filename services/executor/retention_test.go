package executor

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/pkg/cluster"
	"github.com/gridwire/gridwire/pkg/shellquote"
	"github.com/gridwire/gridwire/pkg/target"
)

// clock is a settable clock that counts how often it was read.
type clock struct {
	mu    sync.Mutex
	now   time.Time
	reads atomic.Int64
}

func (c *clock) Now() time.Time {
	c.reads.Add(1)
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// retained is a fork cluster with a retention, its work root a fresh directory.
func retained(t testing.TB, after time.Duration) (Config, string) {
	root := t.TempDir()
	cl := localCluster()
	cl.Retention = &cluster.Retention{After: after}
	return Config{Cluster: cl, ID: "x1", WorkRoot: root, SweepEvery: 20 * time.Millisecond,
		RemoveTries: 2, RemoveBackoff: 10 * time.Millisecond}, root
}

// runWith runs an executor with a clock of the test's.
func (e *env) runWith(cfg Config, tg Target, now func() time.Time) {
	e.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, cfg, Deps{JS: e.bus.JS, Conn: e.bus.Conn, Store: e.store, Target: tg, Now: now,
			Logger: slog.New(slog.NewTextHandler(testWriter{e.t}, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	}()
	e.t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			e.t.Errorf("executor run: %v", err)
		}
	})
}

// ended records a whole run of a job in dir, with a file in it, that ran on the cluster
// and succeeded after its stage-out (as the watcher and stager would), with the
// incarnation's DELETE set to del ("" for none).
func (e *env) ended(cl, dir, del string) string {
	e.t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, events.ControlDir), 0o755); err != nil {
		e.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "out.txt"), []byte("result\n"), 0o644); err != nil {
		e.t.Fatal(err)
	}
	inc := forkIncarnation(cl, dir, "true")
	if del != "" {
		inc.Scripts[events.ScriptDelete] = events.Script{Body: del}
	}
	id := e.queue(inc)
	zero := 0
	e.append(id, events.Started, cl, events.StartedData{Cluster: cl, NativeID: "1", Running: true})
	e.append(id, events.Exited, cl, events.ExitedData{ExitCode: 0})
	e.append(id, events.StagedOut, cl, events.StagedOutData{OK: true})
	e.append(id, events.Succeeded, "", events.EndData{ExitCode: &zero})
	return id
}

// history is the job's stored events.
func (e *env) history(id string) []events.Event {
	e.t.Helper()
	h, err := e.store.Load(context.Background(), id)
	if err != nil {
		e.t.Fatal(err)
	}
	return h.Events
}

func (e *env) sound(ids ...string) {
	e.t.Helper()
	log := map[string][]events.Event{}
	for _, id := range ids {
		log[id] = e.history(id)
	}
	if r := events.CheckInvariants(log, ids); !r.OK() {
		e.t.Fatalf("invariants: %+v\n%s", r, strings.Join(r.Problems, "\n"))
	}
}

func deletedFact(st events.State) bool { return st.DirectoryDeleted != nil }

// Retention 0 on a fork cluster: the directory of a job that ended goes at once, with the
// default removal (no DELETE in the profile), and the fact follows the end in its log.
func TestRetentionZeroRemovesTheDirectory(t *testing.T) {
	e := newEnv(t)
	cfg, root := retained(t, 0)
	id := events.NewID()
	dir := filepath.Join(root, id)
	e.ended("local", dir, "")
	e.run(cfg, &ForkTarget{Cluster: "local"})
	st := e.waitFor(id, "directory_deleted", deletedFact)
	f := st.DirectoryDeleted
	if !f.OK || f.Script != removeDefault || !slices.Equal(f.Paths, []string{dir}) || f.Tries != 1 || f.Executor != "x1" {
		t.Fatalf("fact %+v", f)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("the directory is still there: %v", err)
	}
	if st.Status != events.StatusSucceeded {
		t.Fatalf("status %s after directory_deleted", st.Status)
	}
	names := e.names(id)
	if names[len(names)-1] != events.DirectoryDeleted || names[len(names)-2] != events.Succeeded {
		t.Fatalf("history %v", names)
	}
	e.sound(id)
}

// A job's directory outside the cluster's work root is never removed: the refusal is the
// fact, and the directory stays.
func TestRetentionRefusesADirectoryOutsideTheWorkRoot(t *testing.T) {
	e := newEnv(t)
	cfg, _ := retained(t, 0)
	id := events.NewID()
	dir := filepath.Join(t.TempDir(), id)
	e.ended("local", dir, "")
	e.run(cfg, &ForkTarget{Cluster: "local"})
	f := e.waitFor(id, "directory_deleted", deletedFact).DirectoryDeleted
	if f.OK || f.Script != "refused" || !strings.Contains(f.Reason, "work root") {
		t.Fatalf("fact %+v", f)
	}
	if _, err := os.Stat(filepath.Join(dir, "out.txt")); err != nil {
		t.Fatalf("the directory outside the root was touched: %v", err)
	}
	e.sound(id)
}

// The directory is kept until the job ended longer ago than the retention: read on a
// clock of the test's, which the sweeps consult; after it moves past, it goes.
func TestRetentionWaitsForItsTime(t *testing.T) {
	e := newEnv(t)
	cfg, root := retained(t, 2*time.Second)
	id := events.NewID()
	dir := filepath.Join(root, id)
	e.ended("local", dir, "")
	c := &clock{now: time.Now()}
	e.runWith(cfg, &ForkTarget{Cluster: "local"}, c.Now)
	kv, err := retentionBucket(context.Background(), e.bus.JS)
	if err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the attempt is scheduled", func() bool {
		_, err := kv.Get(context.Background(), dueKey("local", id, 1))
		return err == nil
	})
	// Each sweep reads the clock to decide; several sweeps decided not yet.
	seen := c.reads.Load()
	waitUntil(t, "sweeps", func() bool { return c.reads.Load() > seen+5 })
	if _, err := os.Stat(filepath.Join(dir, "out.txt")); err != nil {
		t.Fatalf("removed before its time: %v", err)
	}
	if st, _ := e.store.State(context.Background(), id); st.DirectoryDeleted != nil {
		t.Fatalf("recorded before its time: %+v", st.DirectoryDeleted)
	}
	c.advance(3 * time.Second)
	e.waitFor(id, "directory_deleted", deletedFact)
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("the directory is still there: %v", err)
	}
	waitUntil(t, "the schedule forgets it", func() bool {
		_, err := kv.Get(context.Background(), dueKey("local", id, 1))
		return err != nil
	})
	e.sound(id)
}

// The profile's DELETE runs with the directory as its FILE (here: writes a marker, then
// removes it), and its name is in the fact.
func TestRetentionRunsTheProfilesDelete(t *testing.T) {
	e := newEnv(t)
	cfg, root := retained(t, 0)
	marker := filepath.Join(t.TempDir(), "deleted")
	id := events.NewID()
	dir := filepath.Join(root, id)
	e.ended("local", dir, `echo "$GW_PATH" >> `+shellquote.Quote(marker)+` && rm -rf -- "${GW_PATH:-$GW_WORKDIR}"`)
	e.run(cfg, &ForkTarget{Cluster: "local"})
	f := e.waitFor(id, "directory_deleted", deletedFact).DirectoryDeleted
	if !f.OK || f.Script != events.ScriptDelete {
		t.Fatalf("fact %+v", f)
	}
	if got := waitFile(t, marker); got != dir+"\n" {
		t.Fatalf("marker %q, want the directory", got)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("the directory is still there: %v", err)
	}
}

// A DELETE that keeps failing is run RemoveTries times, and the failure is the fact.
func TestRetentionRecordsAFailingDelete(t *testing.T) {
	e := newEnv(t)
	cfg, root := retained(t, 0)
	id := events.NewID()
	dir := filepath.Join(root, id)
	e.ended("local", dir, `echo "cannot remove $GW_PATH" >&2; exit 4`)
	e.run(cfg, &ForkTarget{Cluster: "local"})
	f := e.waitFor(id, "directory_deleted", deletedFact).DirectoryDeleted
	if f.OK || f.ExitCode != 4 || f.Tries != 2 || !strings.Contains(f.Reason, "cannot remove") {
		t.Fatalf("fact %+v", f)
	}
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("the directory: %v", err)
	}
	e.sound(id)
}

// countingRemover counts the removals a target runs.
type countingRemover struct {
	*ForkTarget
	n *atomic.Int64
}

func (c countingRemover) Remove(ctx context.Context, st events.State, dir string) (target.Output, string, error) {
	c.n.Add(1)
	return c.ForkTarget.Remove(ctx, st, dir)
}

// Two executors of one cluster: each directory is removed once and recorded once.
func TestTwoExecutorsRemoveEachDirectoryOnce(t *testing.T) {
	e := newEnv(t)
	cfg, root := retained(t, 0)
	marker := filepath.Join(t.TempDir(), "deleted")
	var ids []string
	for range 8 {
		id := events.NewID()
		e.ended("local", filepath.Join(root, id), `echo "$GW_PATH" >> `+shellquote.Quote(marker)+` && rm -rf -- "$GW_PATH"`)
		ids = append(ids, id)
	}
	var n atomic.Int64
	second := cfg
	second.ID = "x2"
	e.run(cfg, countingRemover{&ForkTarget{Cluster: "local"}, &n})
	e.run(second, countingRemover{&ForkTarget{Cluster: "local"}, &n})
	for _, id := range ids {
		e.waitFor(id, "directory_deleted", deletedFact)
		if c := count(e.names(id), events.DirectoryDeleted); c != 1 {
			t.Errorf("job %s: %d directory_deleted", id, c)
		}
	}
	if got := n.Load(); got != int64(len(ids)) {
		t.Errorf("%d removals ran for %d directories", got, len(ids))
	}
	lines := strings.Split(strings.TrimSpace(waitFile(t, marker)), "\n")
	slices.Sort(lines)
	if len(lines) != len(ids) || len(slices.Compact(lines)) != len(ids) {
		t.Errorf("DELETE ran for %v", lines)
	}
	e.sound(ids...)
}

// The bounds of what the retention removes: a job's own directory under the root.
func TestJobDir(t *testing.T) {
	id := events.NewID()
	for _, c := range []struct {
		root, dir string
		ok        bool
	}{
		{"/w", "/w/" + id, true}, {"/w/", "/w/" + id, true}, {"/w", "/w/" + id + ".2", true},
		{"/w", "/w", false}, {"/w", "/w/" + id + "/", false}, {"/w", "/w/../etc", false}, {"/w", "/w/x/" + id, false},
		{"/w", "/v/" + id, false}, {"/w", "/w/" + id + ".1", false}, {"/w", "/w/" + id + ".02", false},
		{"/w", "/w/" + id + "x", false}, {"/", "/" + id, false}, {"", "/" + id, false}, {"w", "w/" + id, false},
	} {
		err := jobDir(c.root, id, c.dir)
		if (err == nil) != c.ok || err != nil && !errors.Is(err, ErrOutsideWorkRoot) {
			t.Errorf("root %q dir %q: %v, want ok %v", c.root, c.dir, err, c.ok)
		}
	}
}

// waitUntil polls cond; the bound only keeps a broken test from hanging.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// countingStore counts the job states read whole (State).
type countingStore struct {
	*events.Store
	states atomic.Int64
}

func (c *countingStore) State(ctx context.Context, id string) (events.State, error) {
	c.states.Add(1)
	return c.Store.State(ctx, id)
}

// A sweep reads an ended job once to learn when its directory is due, not on every
// sweep until then: the schedule costs the log nothing while it waits.
func TestRetentionReadsAWaitingJobOnce(t *testing.T) {
	e := newEnv(t)
	cfg, root := retained(t, time.Hour)
	id := events.NewID()
	e.ended("local", filepath.Join(root, id), "")
	c := &clock{now: time.Now()}
	store := &countingStore{Store: e.store}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, cfg, Deps{JS: e.bus.JS, Conn: e.bus.Conn, Store: store, Target: &ForkTarget{Cluster: "local"}, Now: c.Now})
	}()
	defer func() { cancel(); <-done }()
	kv, err := retentionBucket(context.Background(), e.bus.JS)
	if err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the attempt is scheduled", func() bool {
		_, err := kv.Get(context.Background(), dueKey("local", id, 1))
		return err == nil
	})
	seen := c.reads.Load()
	waitUntil(t, "sweeps", func() bool { return c.reads.Load() > seen+20 })
	if n := store.states.Load(); n > 3 {
		t.Fatalf("%d reads of the job over %d clock reads, want it read once while it waits", n, c.reads.Load()-seen)
	}
}

// A job run again after a crash: its first attempt's directory waits for the restart,
// and the last attempt's removal takes every attempt's directory on the cluster, in one
// directory_deleted after the last end.
func TestRetentionRemovesEveryAttemptsDirectory(t *testing.T) {
	e := newEnv(t)
	cfg, root := retained(t, 0)
	id := events.NewID()
	first, second := filepath.Join(root, id), filepath.Join(root, id+".2")
	for _, d := range []string{first, second} {
		if err := os.MkdirAll(filepath.Join(d, events.ControlDir), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	sub, _ := events.New(id, events.Submitted, "", time.Now(), events.Job{ID: id, Executable: "/bin/false", Restarts: 1})
	if _, err := e.store.Create(context.Background(), sub); err != nil {
		t.Fatal(err)
	}
	code := 1
	e.append(id, events.Incarnated, "", forkIncarnation("local", first, "false"))
	e.append(id, events.Queued, "local", events.QueuedData{Cluster: "local"})
	e.append(id, events.Started, "local", events.StartedData{Cluster: "local", NativeID: "1", Running: true})
	e.append(id, events.Exited, "local", events.ExitedData{ExitCode: code})
	e.append(id, events.StagedOut, "local", events.StagedOutData{OK: true})
	e.append(id, events.Failed, "", events.EndData{ExitCode: &code})
	e.run(cfg, &ForkTarget{Cluster: "local"})
	kv, err := retentionBucket(context.Background(), e.bus.JS)
	if err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the first attempt is scheduled", func() bool {
		_, err := kv.Get(context.Background(), dueKey("local", id, 1))
		return err == nil
	})
	e.append(id, events.Restarted, "", events.RestartedData{Attempt: 2, Of: 2, Reason: "exit code 1"})
	// The second attempt is cancelled before it is queued (a queued one would be this
	// executor's to start).
	e.append(id, events.Incarnated, "", forkIncarnation("local", second, "false"))
	e.append(id, events.Cancelled, "", events.EndData{Reason: "cancelled before it was queued"})
	f := e.waitFor(id, "directory_deleted", deletedFact).DirectoryDeleted
	if !f.OK || !slices.Equal(f.Paths, []string{second, first}) {
		t.Fatalf("fact %+v", f)
	}
	for _, d := range []string{first, second} {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("%s is still there: %v", d, err)
		}
	}
	if c := count(e.names(id), events.DirectoryDeleted); c != 1 {
		t.Fatalf("%d directory_deleted", c)
	}
	e.sound(id)
}
