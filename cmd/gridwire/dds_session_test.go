package main

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/pkg/cluster"
	"github.com/gridwire/gridwire/services/ingest"
)

// ddsGatedExe is a DDS task's exe that writes its DDS_SESSION_ID and DDS_TASK_PATH into
// its working directory and runs until the test writes its exit code into "release".
const ddsGatedExe = `/bin/sh -c 'printf %s "$DDS_SESSION_ID" &gt; session; printf %s "$DDS_TASK_PATH" &gt; path; while [ ! -s release ]; do sleep 0.02; done; exit "$(cat release)"'`

// sessionTopology is a topology of a task alone and a collection of two tasks, main n
// times; decl goes among the declarations.
func sessionTopology(n int, decl string) string {
	return `<topology name="t">` + decl + `
  <decltask name="solo"><exe>` + ddsGatedExe + `</exe></decltask>
  <decltask name="member"><exe>` + ddsGatedExe + `</exe></decltask>
  <declcollection name="pair"><tasks><name n="2">member</name></tasks></declcollection>
  <main name="main">
    <group name="g" n="` + strconv.Itoa(n) + `"><task>solo</task><collection>pair</collection></group>
  </main>
</topology>`
}

// submitDDS submits a topology and returns its job IDs, the session (parent) first.
func (h *harness) submitDDS(doc string) []string {
	h.t.Helper()
	acc, err := h.submit.Submit(context.Background(), ingest.Submission{File: "topology.xml", Data: []byte(doc), Submitter: "test"})
	if err != nil {
		h.t.Fatal(err)
	}
	if acc.Parent == "" || acc.Parent != acc.Jobs[0] {
		h.t.Fatalf("accepted %+v, want the session first", acc)
	}
	h.t.Cleanup(func() { h.releaseSession(acc.Parent) })
	return acc.Jobs
}

// releaseSession lets every gated task of a session that still runs end, so a test
// that stops half way leaves no process behind.
func (h *harness) releaseSession(session string) {
	p, err := h.store.State(context.Background(), session)
	if err != nil || p.Job == nil {
		return
	}
	for _, id := range p.Job.ChildIDs() {
		if st, err := h.store.State(context.Background(), id); err == nil && !st.Status.Terminal() && st.Incarnation != nil {
			_ = os.WriteFile(filepath.Join(st.Incarnation.WorkDir, "release"), []byte("0"), 0o644)
		}
	}
}

// A topology is a session: every task sees the session's ID in DDS_SESSION_ID, and a
// cancel on the session stops every task.
func TestDDSSessionIDAndCancel(t *testing.T) {
	h := newHarness(t)
	ids := h.submitDDS(sessionTopology(1, ""))
	if len(ids) != 4 {
		t.Fatalf("%d jobs, want a session and 3 tasks", len(ids))
	}
	session := ids[0]
	for _, id := range ids[1:] {
		h.waitFor(id, "RUNNING", isRunning)
		got := h.waitFile(id, "session")
		if got != session {
			t.Errorf("task %s: DDS_SESSION_ID %q, want the session %s", id, got, session)
		}
	}
	h.ask(session, events.CancelRequested)
	for _, id := range ids[1:] {
		if st := h.waitEnd(id); st.Status != events.StatusCancelled {
			t.Errorf("task %s %s (%s), want CANCELLED", id, st.Status, st.Reason)
		}
	}
	st := h.waitEnd(session)
	if st.Status != events.StatusCancelled || counts(st)[events.StatusCancelled] != 3 {
		t.Fatalf("session %s %+v, want CANCELLED with 3 CANCELLED", st.Status, st.Group)
	}
}

// waitFile waits until the job's working directory holds a non-empty file and returns it.
func (h *harness) waitFile(id, name string) string {
	h.t.Helper()
	var data []byte
	h.waitFor(id, name+" written", func(events.State) bool {
		data, _ = os.ReadFile(filepath.Join(h.workDir(id), name))
		return len(data) > 0
	})
	return string(data)
}

// A main that starts no task is a valid topology (DDS schedules zero of zero): the
// session exists alone and ends at once, succeeded with no children.
func TestDDSEmptyMainSessionEnds(t *testing.T) {
	h := newHarness(t)
	ids := h.submitDDS(`<topology name="idle">
  <decltask name="t"><exe>/bin/true</exe></decltask>
  <main name="main"><group name="g" n="2"></group></main>
</topology>`)
	if len(ids) != 1 {
		t.Fatalf("%d jobs, want the session alone", len(ids))
	}
	st := h.waitEnd(ids[0])
	if st.Status != events.StatusSucceeded || st.Group == nil || st.Group.Children != 0 {
		t.Fatalf("session %s %+v, want SUCCEEDED with 0 children", st.Status, st.Group)
	}
	h.assertCleanHistory(ids[0])
}

// A task with TaskCrashed → RestartTask 3 that crashes every time runs four times, each
// attempt with its own start and end in its own working directory, and ends FAILED; its
// session ends FAILED only after the last attempt.
func TestDDSRestartTaskRunsACrashedTaskAgain(t *testing.T) {
	h := newHarness(t)
	ids := h.submitDDS(`<topology name="crashy">
  <decltrigger name="again" condition="TaskCrashed" action="RestartTask" arg="3"/>
  <decltask name="crash"><exe>/bin/sh -c 'echo "$DDS_TASK_ID" &gt; ran; exit 7'</exe><triggers><name>again</name></triggers></decltask>
  <main name="main"><task>crash</task></main>
</topology>`)
	task := ids[1]
	st := h.waitFor(task, "FAILED after its last attempt", func(st events.State) bool {
		return st.Status == events.StatusFailed && !st.Restartable()
	})
	if st.Attempt() != 4 || *st.ExitCode != 7 {
		t.Fatalf("ended at attempt %d with exit %v, want attempt 4 with exit 7", st.Attempt(), st.ExitCode)
	}
	dirs := map[string]bool{st.Incarnation.WorkDir: true}
	for i, a := range st.Attempts {
		if a.Attempt != i+1 || a.Status != events.StatusFailed || a.ExitCode == nil || *a.ExitCode != 7 || a.NativeID == "" {
			t.Errorf("attempt %d: %+v, want FAILED with exit 7 after a run", i+1, a)
		}
		dirs[a.WorkDir] = true
	}
	if len(dirs) != 4 {
		t.Errorf("attempts ran in %d working directories, want 4 of their own", len(dirs))
	}
	count := map[events.Name]int{}
	for _, e := range h.history(task) {
		count[e.Name]++
	}
	for _, n := range []events.Name{events.Incarnated, events.Started, events.Exited, events.Failed} {
		if count[n] != 4 {
			t.Errorf("%d %s events, want one per attempt (4)", count[n], n)
		}
	}
	if count[events.Restarted] != 3 {
		t.Errorf("%d restarted events, want 3", count[events.Restarted])
	}
	if _, err := events.Replay(h.history(task)); err != nil {
		t.Errorf("history does not replay: %v", err)
	}
	if s := h.waitEnd(ids[0]); s.Status != events.StatusFailed {
		t.Fatalf("session %s, want FAILED", s.Status)
	}
	h.assertCleanHistory(ids[0])
}

// updateTopology is a session's topology: task a n times in a group, and the other
// tasks named, each alone.
func updateTopology(n int, alone ...string) string {
	doc := `<topology name="upd">
  <decltask name="a"><exe>` + ddsGatedExe + `</exe></decltask>
  <decltask name="b"><exe>` + ddsGatedExe + `</exe></decltask>
  <decltask name="c"><exe>` + ddsGatedExe + `</exe></decltask>
  <main name="main"><group name="g" n="` + strconv.Itoa(n) + `"><task>a</task></group>`
	for _, t := range alone {
		doc += `<task>` + t + `</task>`
	}
	return doc + "</main>\n</topology>"
}

// An update of a running session starts exactly the instances the new topology adds,
// stops exactly those it removes, and leaves the rest running, matched by DDS task ID.
func TestDDSTopologyUpdate(t *testing.T) {
	h := newHarness(t)
	ids := h.submitDDS(updateTopology(2, "b"))
	session, a0, a1, b := ids[0], ids[1], ids[2], ids[3]
	for _, id := range ids[1:] {
		h.waitFor(id, "RUNNING", isRunning)
	}
	up, err := h.submit.UpdateSession(context.Background(), session, ingest.Submission{File: "v2.xml",
		Data: []byte(updateTopology(3, "c")), Submitter: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if len(up.Added) != 2 || len(up.Removed) != 1 || up.Removed[0] != b || up.Kept != 2 {
		t.Fatalf("update %+v, want 2 added, %s removed, 2 kept", up, b)
	}
	if st := h.waitEnd(b); st.Status != events.StatusCancelled || !strings.Contains(st.Reason, "removed from session") &&
		!strings.Contains(st.Reason, "cancel") {
		t.Errorf("removed task %s %s (%s), want CANCELLED", b, st.Status, st.Reason)
	}
	paths := map[string]bool{}
	for _, id := range up.Added {
		h.waitFor(id, "RUNNING", isRunning)
		paths[h.waitFile(id, "path")] = true
		if got := h.waitFile(id, "session"); got != session {
			t.Errorf("added task %s sees session %q, want %s", id, got, session)
		}
	}
	if !paths["main/g/a_2"] || !paths["main/c_0"] {
		t.Errorf("added instances %v, want main/g/a_2 and main/c_0", paths)
	}
	for _, id := range []string{a0, a1} {
		st, _ := h.store.State(context.Background(), id)
		if st.Status != events.StatusRunning || st.CancelRequested {
			t.Errorf("kept task %s %s (cancel asked %v), want still RUNNING", id, st.Status, st.CancelRequested)
		}
	}
	p, _ := h.store.State(context.Background(), session)
	if len(p.Job.Children) != 4 || p.Job.Children[2] != up.Added[0] {
		t.Errorf("session children %v, want a_0, a_1 and the 2 added", p.Job.Children)
	}
	for _, id := range append([]string{a0, a1}, up.Added...) {
		h.release(id, "0")
	}
	st := h.waitEnd(session)
	if st.Status != events.StatusSucceeded || st.Group.Children != 4 {
		t.Fatalf("session %s %+v, want SUCCEEDED over its 4 children", st.Status, st.Group)
	}
	if _, err := h.submit.UpdateSession(context.Background(), session, ingest.Submission{File: "v3.xml",
		Data: []byte(updateTopology(1)), Submitter: "test"}); err == nil || !strings.Contains(err.Error(), "has ended") {
		t.Errorf("update of an ended session: %v, want refused", err)
	}
	h.assertCleanHistory(session)
}

// The env script is sourced before the exe, and the exe line is bash's to expand, as
// DDS's task wrapper runs it; what it expands stays in the task's own command.
func TestDDSEnvScriptAndExpansion(t *testing.T) {
	h := newHarness(t)
	env := filepath.Join(t.TempDir(), "env.sh")
	if err := os.WriteFile(env, []byte("export GREETING='hello; touch injected'\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ids := h.submitDDS(`<topology name="env">
  <decltask name="t"><exe>echo "$GREETING from $DDS_TASK_NAME" &gt; out; echo $GREETING &gt;&gt; out</exe><env>` + env + `</env></decltask>
  <main name="main"><task>t</task></main>
</topology>`)
	st, out := h.succeededOut(ids[1])
	if string(out) != "hello; touch injected from t\nhello; touch injected\n" {
		t.Errorf("out %q, want the env script's value expanded, never run", out)
	}
	if _, err := os.Stat(filepath.Join(st.Incarnation.WorkDir, "injected")); err == nil {
		t.Error("an expanded value ran as a command")
	}
}

// reachable="false": the exe and the env script are files on the gateway that the
// stager delivers into the task's directory, and the task runs those copies.
func TestDDSUnreachableExeIsDelivered(t *testing.T) {
	files := t.TempDir()
	h := newHarnessWith(t, withFileRoot(t, cluster.Default(), files))
	exe, env := filepath.Join(files, "task.sh"), filepath.Join(files, "env.sh")
	if err := os.WriteFile(exe, []byte("#!/bin/sh\necho \"$1 $WHO\" > out\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(env, []byte("export WHO=delivered\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ids := h.submitDDS(`<topology name="ship">
  <decltask name="t"><exe reachable="false">` + exe + ` %taskIndex%</exe><env reachable="false">` + env + `</env></decltask>
  <main name="main"><group name="g" n="2"><task>t</task></group></main>
</topology>`)
	for i, id := range ids[1:] {
		_, out := h.succeededOut(id)
		if want := strconv.Itoa(i) + " delivered\n"; string(out) != want {
			t.Errorf("task %d wrote %q, want %q", i, out, want)
		}
	}
}

// Inline assets are files NAME.asset in the task's directory when it starts, holding
// their value as written, whatever characters it has.
func TestDDSInlineAssets(t *testing.T) {
	h := newHarness(t)
	ids := h.submitDDS(`<topology name="assets">
  <asset name="conf" type="inline" visibility="task" value="a=1; $(touch injected) 'q'"/>
  <asset name="#shared" type="inline" visibility="global" value="g"/>
  <decltask name="t"><exe>/bin/sh -c 'cat conf.asset "#shared.asset" &gt; out'</exe><assets><name>conf</name><name>#shared</name></assets></decltask>
  <main name="main"><task>t</task></main>
</topology>`)
	st, out := h.succeededOut(ids[1])
	if string(out) != "a=1; $(touch injected) 'q'g" {
		t.Errorf("assets read %q", out)
	}
	if _, err := os.Stat(filepath.Join(st.Incarnation.WorkDir, "injected")); err == nil {
		t.Error("an asset's value ran as a command")
	}
}
