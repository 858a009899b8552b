package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/services/executor"
	"github.com/gridwire/gridwire/services/ingest"
)

// jrdlGated is a JRDL job element whose program runs until the test writes its exit
// code into "release" in its working directory; extra goes inside the element.
func jrdlGated(tag, extra string) string {
	return "<" + tag + `>
    <executable><path><stringElement value="/bin/sh"/></path></executable>
    <arguments><stringArray>
      <string><stringElement value="-c"/></string>
      <string><stringElement value="while [ ! -s release ]; do sleep 0.02; done; exit &quot;$(cat release)&quot;"/></string>
    </stringArray></arguments>` + extra + "\n  </" + tag + ">\n"
}

// submitJRDL submits a JRDL document and returns its job IDs, the parent first.
func (h *harness) submitJRDL(doc string) []string {
	h.t.Helper()
	acc, err := h.submit.Submit(context.Background(), ingest.Submission{File: "group.jrdl", Data: []byte(doc), Submitter: "test"})
	if err != nil {
		h.t.Fatal(err)
	}
	return acc.Jobs
}

func (h *harness) ask(id string, name events.Name) {
	h.t.Helper()
	// The control API is the executor's: its requests are signed with the executor's key.
	if _, err := (executor.ControlAPI{Store: h.roleStore(events.RoleExecutor)}).Request(context.Background(), id, name, events.Note{Reason: "test"}); err != nil {
		h.t.Fatalf("%s of %s: %v", name, id, err)
	}
}

func counts(st events.State) map[events.Status]int {
	if st.Group == nil {
		return nil
	}
	return st.Group.Counts
}

// A document of two jobs: its parent runs once one child runs and ends, with counts,
// FAILED because one child failed.
func TestGroupFollowsItsChildren(t *testing.T) {
	h := newHarness(t)
	ids := h.submitJRDL("<jrdl>\n" + jrdlGated("job", "") + jrdlGated("job", "") + "</jrdl>")
	if len(ids) != 3 {
		t.Fatalf("%d jobs, want a parent and 2", len(ids))
	}
	parent, a, b := ids[0], ids[1], ids[2]
	h.waitFor(a, "RUNNING", isRunning)
	h.waitFor(parent, "RUNNING", isRunning)
	h.release(a, "0")
	h.waitEnd(a)
	h.waitFor(b, "RUNNING", isRunning)
	if st, _ := h.store.State(context.Background(), parent); st.Status != events.StatusRunning {
		t.Fatalf("parent %s with one child still running, want RUNNING", st.Status)
	}
	h.release(b, "1")
	st := h.waitEnd(parent)
	if st.Status != events.StatusFailed || !strings.Contains(st.Reason, "1 of 2 children failed; first: "+b) {
		t.Fatalf("parent %s %q, want FAILED naming child %s", st.Status, st.Reason, b)
	}
	if c := counts(st); c[events.StatusSucceeded] != 1 || c[events.StatusFailed] != 1 || st.Group.Children != 2 {
		t.Fatalf("parent summary %+v, want 1 SUCCEEDED and 1 FAILED of 2", st.Group)
	}
	h.assertCleanHistory(parent)
}

func TestGroupSucceedsOnlyWhenEveryChildDid(t *testing.T) {
	h := newHarness(t)
	ids := h.submitJRDL("<jrdl>\n" + jrdlGated("job", "") + jrdlGated("job", "") + "</jrdl>")
	h.waitFor(ids[1], "RUNNING", isRunning)
	h.waitFor(ids[2], "RUNNING", isRunning)
	h.release(ids[1], "0")
	h.release(ids[2], "0")
	st := h.waitEnd(ids[0])
	if st.Status != events.StatusSucceeded || counts(st)[events.StatusSucceeded] != 2 {
		t.Fatalf("parent %s %+v, want SUCCEEDED with 2 SUCCEEDED", st.Status, st.Group)
	}
}

// Cancel on the parent ends every running child: real processes, aborted.
func TestCancelOnParentCancelsItsChildren(t *testing.T) {
	h := newHarness(t)
	ids := h.submitJRDL("<jrdl>\n" + jrdlGated("job", "") + jrdlGated("job", "") + "</jrdl>")
	h.waitFor(ids[1], "RUNNING", isRunning)
	h.waitFor(ids[2], "RUNNING", isRunning)
	h.ask(ids[0], events.CancelRequested)
	for _, id := range ids[1:] {
		if st := h.waitEnd(id); st.Status != events.StatusCancelled {
			t.Fatalf("child %s %s (%s), want CANCELLED", id, st.Status, st.Reason)
		}
	}
	st := h.waitEnd(ids[0])
	if st.Status != events.StatusCancelled || counts(st)[events.StatusCancelled] != 2 {
		t.Fatalf("parent %s %+v, want CANCELLED with 2 CANCELLED", st.Status, st.Group)
	}
	// Every event of the group, its children and the requests the watcher passed on, is
	// signed by a role that may write it.
	out, _, err := runCLI(context.Background(), "audit", "verify", "--all", "--nats-url="+h.natsURL(), "--signing-keys="+h.keysDir())
	if err != nil || !strings.Contains(out, "verified 3 jobs") || !strings.Contains(out, ": 0 broken") || strings.Contains(out, "unsigned") {
		t.Fatalf("audit verify of a cancelled group: %v\n%s", err, out)
	}
}

// Hold and resume on the parent reach the children, and the parent follows them.
func TestHoldAndResumeOnParent(t *testing.T) {
	h := newHarness(t)
	ids := h.submitJRDL("<jrdl>\n" + jrdlGated("job", "") + jrdlGated("job", "") + "</jrdl>")
	h.waitFor(ids[1], "RUNNING", isRunning)
	h.waitFor(ids[2], "RUNNING", isRunning)
	h.ask(ids[0], events.HoldRequested)
	isHeld := func(st events.State) bool { return st.Status == events.StatusHeld }
	h.waitFor(ids[1], "HELD", isHeld)
	h.waitFor(ids[2], "HELD", isHeld)
	h.waitFor(ids[0], "HELD", isHeld)
	h.ask(ids[0], events.ResumeRequested)
	h.waitFor(ids[1], "RUNNING", isRunning)
	h.waitFor(ids[0], "RUNNING", isRunning)
	h.release(ids[1], "0")
	h.release(ids[2], "0")
	if st := h.waitEnd(ids[0]); st.Status != events.StatusSucceeded {
		t.Fatalf("parent %s, want SUCCEEDED", st.Status)
	}
}

const pbsOnly = `
    <jobManagerType><enumeration><enumerationValue><pbs/></enumerationValue></enumeration></jobManagerType>`

// A subjob that cannot be placed (it asks for PBS; the local cluster is fork) keeps its
// sibling from starting at all, and the sibling fails with its reason.
func TestCoallocatedSiblingNeverStartsWhenOneCannotBePlaced(t *testing.T) {
	h := newHarness(t)
	ids := h.submitJRDL("<jrdl>\n<job>\n" + jrdlGated("subjob", "") + jrdlGated("subjob", pbsOnly) + "</job>\n</jrdl>")
	if len(ids) != 3 {
		t.Fatalf("%d jobs, want a parent and 2 subjobs", len(ids))
	}
	unplaced := h.waitEnd(ids[2])
	st := h.waitEnd(ids[1])
	if st.Status != events.StatusFailed || !strings.Contains(st.Reason, "co-allocated subjob "+ids[2]) ||
		!strings.Contains(st.Reason, unplaced.Reason) {
		t.Fatalf("sibling %s %q, want FAILED with subjob %s's reason %q", st.Status, st.Reason, ids[2], unplaced.Reason)
	}
	for _, e := range h.history(ids[1]) {
		if e.Name == events.Started {
			t.Fatal("the placed subjob started although its sibling could not be placed")
		}
	}
	if p := h.waitEnd(ids[0]); p.Status != events.StatusFailed {
		t.Fatalf("parent %s, want FAILED", p.Status)
	}
}

// A co-allocated subjob waits, QUEUED and not started, while its sibling is not staged:
// here the stager is down, so the sibling stays INCARNATED until it comes back.
func TestCoallocatedSubjobWaitsForItsSibling(t *testing.T) {
	h := newHarness(t)
	h.stop("stager")
	ids := h.submitJRDL("<jrdl>\n<job>\n" + jrdlGated("subjob", "") + jrdlGated("subjob", "") + "</job>\n</jrdl>")
	a, b := ids[1], ids[2]
	h.waitFor(a, "INCARNATED", func(st events.State) bool { return st.Status == events.StatusIncarnated })
	h.waitFor(b, "INCARNATED", func(st events.State) bool { return st.Status == events.StatusIncarnated })
	// Hand a to its executor as the stager would, with b still unstaged.
	if _, err := h.roleStore(events.RoleStager).Decide(context.Background(), a, func(s events.State) ([]events.Event, error) {
		e, err := events.New(a, events.Queued, s.Cluster, s.UpdatedAt, events.QueuedData{Cluster: s.Cluster})
		return []events.Event{e}, err
	}); err != nil {
		t.Fatal(err)
	}
	h.waitFor(a, "its queued event read", func(st events.State) bool { return st.Status == events.StatusQueued })
	// b is unstaged: a must not start. Starting b's stage-in releases both.
	h.start("stager")
	h.waitFor(b, "RUNNING", isRunning)
	stA := h.waitFor(a, "RUNNING", isRunning)
	var bQueued events.Event
	for _, e := range h.history(b) {
		if e.Name == events.Queued {
			bQueued = e
		}
	}
	if !stA.StartedAt.After(bQueued.Time) && !stA.StartedAt.Equal(bQueued.Time) {
		t.Fatalf("subjob a started at %v, before its sibling was staged at %v", stA.StartedAt, bQueued.Time)
	}
	// One sibling failing while both run ends the other.
	h.release(b, "4")
	if st := h.waitEnd(a); st.Status != events.StatusCancelled || !strings.Contains(st.Reason, "co-allocated subjob "+b+" (job[0]/subjob[1]) FAILED: exit code 4") {
		t.Fatalf("running sibling %s %q, want CANCELLED naming subjob %s and its exit code", st.Status, st.Reason, b)
	}
	asked := false
	for _, e := range h.history(a) {
		var n events.Note
		if e.Name == events.CancelRequested && e.Payload(&n) == nil && strings.Contains(n.Reason, "co-allocated subjob "+b) {
			asked = true
		}
	}
	if !asked {
		t.Fatalf("sibling %s was not asked to end with subjob %s's reason", a, b)
	}
	if p := h.waitEnd(ids[0]); p.Status != events.StatusFailed {
		t.Fatalf("parent %s, want FAILED", p.Status)
	}
}

// status and history of a parent record show its children as a tree, with the counts.
func TestStatusAndHistoryShowTheGroupTree(t *testing.T) {
	server := serveCLI(t)
	ctx := context.Background()
	doc := writeFile(t, t.TempDir(), "two.jrdl", `<jrdl>
  <job><executable><path><stringElement value="/bin/true"/></path></executable></job>
  <job><executable><path><stringElement value="/bin/false"/></path></executable></job>
</jrdl>`)
	status, out, errOut := cli(ctx, "submit", "--wait", "--server", server, doc)
	if status == exitUsage {
		t.Fatalf("submit: %d %q %q", status, out, errOut)
	}
	var parent string
	var kids []string
	deadline := time.Now().Add(60 * time.Second)
	for {
		_, out, _ = cli(ctx, "list", "--server", server, "--json")
		parent, kids = "", nil
		var views []jobView
		if err := json.Unmarshal([]byte(out), &views); err == nil {
			for _, v := range views {
				if v.Kind == string(events.KindGroup) && v.Status == string(events.StatusFailed) {
					parent = v.ID
				} else if v.Parent != "" {
					kids = append(kids, v.ID)
				}
			}
		}
		if parent != "" && len(kids) == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no FAILED parent with 2 children listed:\n%s", out)
		}
		time.Sleep(50 * time.Millisecond)
	}
	_, out, _ = cli(ctx, "status", "--server", server, parent)
	if !strings.Contains(out, "2 children: 1 FAILED, 1 SUCCEEDED") || !strings.Contains(out, "children of "+parent) {
		t.Fatalf("status of the parent:\n%s", out)
	}
	_, hist, _ := cli(ctx, "history", "--server", server, parent)
	for _, k := range kids {
		if !strings.Contains(out, "└ "+k) || !strings.Contains(hist, "└ "+k) {
			t.Fatalf("child %s missing from the tree\nstatus:\n%s\nhistory:\n%s", k, out, hist)
		}
	}
	// A JRDL job has no name: the tree and the list name it by its place in the document.
	for i, k := range []string{"job[0]", "job[1]"} {
		if !regexp.MustCompile(`└ [0-9A-Z]{26}  ` + regexp.QuoteMeta(k) + ` `).MatchString(out) {
			t.Errorf("the tree does not name child %d %s:\n%s", i, k, out)
		}
	}
	if _, list, _ := cli(ctx, "list", "--server", server); !strings.Contains(list, "  job[1]  ") {
		t.Errorf("list does not name the document's second job:\n%s", list)
	}
	if !strings.Contains(hist, events.Failed.Type()) {
		t.Fatalf("history of the parent has no failed event:\n%s", hist)
	}
}

// jrdlContinue is the coallocationPolicy extension that lets co-allocated subjobs run on
// when a sibling fails.
const jrdlContinue = `
    <coallocationPolicy><enumeration><enumerationValue><continue/></enumerationValue></enumeration></coallocationPolicy>`

// checkCoallocationContinue: with <coallocationPolicy><continue/>, a co-allocated subjob
// that fails leaves its running sibling alone (it runs on and succeeds); the parent
// still fails, counting both. The canonical job names the policy. The e2e suite runs it
// on real SSH.
func checkCoallocationContinue(t *testing.T, h *harness) {
	t.Helper()
	ids := h.submitJRDL("<jrdl>\n<job>" + jrdlContinue + "\n" + jrdlGated("subjob", "") + jrdlGated("subjob", "") + "</job>\n</jrdl>")
	a, b := ids[1], ids[2]
	h.waitFor(a, "RUNNING", isRunning)
	stB := h.waitFor(b, "RUNNING", isRunning)
	if stB.Job.Coallocation == nil || stB.Job.Coallocation.OnSiblingEnd != events.SiblingsContinue {
		t.Fatalf("canonical coallocation %+v; want on_sibling_end continue", stB.Job.Coallocation)
	}
	h.release(b, "3")
	if st := h.waitEnd(b); st.Status != events.StatusFailed {
		t.Fatalf("failing subjob %s", st.Status)
	}
	h.release(a, "0")
	if st := h.waitEnd(a); st.Status != events.StatusSucceeded {
		t.Fatalf("its sibling under the continue policy: %s (%s), want SUCCEEDED", st.Status, st.Reason)
	}
	for _, e := range h.history(a) {
		if e.Name == events.CancelRequested {
			t.Fatal("the sibling was asked to cancel under the continue policy")
		}
	}
	if p := h.waitEnd(ids[0]); p.Status != events.StatusFailed || counts(p)[events.StatusSucceeded] != 1 || counts(p)[events.StatusFailed] != 1 {
		t.Fatalf("parent %s %+v, want FAILED with 1 SUCCEEDED and 1 FAILED", p.Status, p.Group)
	}
}

func TestCoallocationPolicyContinue(t *testing.T) {
	checkCoallocationContinue(t, newHarness(t))
}

// status of a running group sums its children as they are now, as the tree under it
// shows them, not as the record's summary had them at its last move (which can be hours
// old while the children run); a child not shown yet, and one about to run again after a
// crash, counts as SUBMITTED. Each child's row names it (a topology's task path).
func TestStatusOfAGroupSumsItsChildrenNow(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.URL.Path == "/v1/jobs/01M8KAVXHYQWJ0H8RGKZ6BTZYP":
			io.WriteString(w, `{"id":"01M8KAVXHYQWJ0H8RGKZ6BTZYP","status":"RUNNING","kind":"group","children":4,
				"group":{"children":4,"counts":{"QUEUED":2,"RUNNING":1}}}`)
		case r.URL.Path == "/v1/jobs" && r.URL.Query().Get("parent") == "01M8KAVXHYQWJ0H8RGKZ6BTZYP":
			io.WriteString(w, `{"jobs":[{"id":"01M8KAVXHYA0000000000000A1","status":"SUCCEEDED","exit_code":0},
				{"id":"01M8KAVXHYA0000000000000A2","name":"main/workers/worker_1","status":"RUNNING"},
				{"id":"01M8KAVXHYA0000000000000A3","status":"FAILED","restarting":true}],"next":""}`)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	status, out, errOut := cli(context.Background(), "status", "--server", srv.URL, "01M8KAVXHYQWJ0H8RGKZ6BTZYP")
	if status != 0 || !strings.Contains(out, "4 children: 1 RUNNING, 2 SUBMITTED, 1 SUCCEEDED") ||
		!strings.Contains(out, "└ 01M8KAVXHYA0000000000000A2  main/workers/worker_1  RUNNING") {
		t.Fatalf("status of a running group: exit %d\n%s%s", status, out, errOut)
	}
	_, js, _ := cli(context.Background(), "status", "--json", "--server", srv.URL, "01M8KAVXHYQWJ0H8RGKZ6BTZYP")
	if !strings.Contains(js, `"QUEUED":2`) {
		t.Errorf("--json is the API's record as it is: %s", js)
	}
}

// A session a topology update shrank: the children it removed still name it as their
// parent, so ?parent= lists them, but they are no longer its children. status counts
// the session's children alone, as its own verdict does, and lists the removed apart.
func TestStatusOfAnUpdatedSessionCountsItsMembers(t *testing.T) {
	const parent = "01M8KAVXHYQWJ0H8RGKZ6BTZYP"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.URL.Path == "/v1/jobs/"+parent:
			io.WriteString(w, `{"id":"`+parent+`","status":"RUNNING","kind":"group","children":1,
				"group":{"children":3,"counts":{"RUNNING":3}}}`)
		case r.URL.Path == "/v1/jobs/"+parent+"/events":
			io.WriteString(w, `[{"id":"01M8KAVXHYE0000000000000E1","name":"submitted","job":"`+parent+`","seq":1,"data":{"kind":"group"}},
				{"id":"01M8KAVXHYE0000000000000E2","name":"session_updated","job":"`+parent+`","seq":9,
				 "data":{"removed":["01M8KAVXHYA0000000000000A2","01M8KAVXHYA0000000000000A3"]}}]`)
		case r.URL.Path == "/v1/jobs" && r.URL.Query().Get("parent") == parent:
			io.WriteString(w, `{"jobs":[{"id":"01M8KAVXHYA0000000000000A1","name":"main/g/s_0","status":"RUNNING"},
				{"id":"01M8KAVXHYA0000000000000A2","name":"main/g/s_1","status":"CANCELLED"},
				{"id":"01M8KAVXHYA0000000000000A3","name":"main/g/s_2","status":"CANCELLED"}],"next":""}`)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	status, out, errOut := cli(context.Background(), "status", "--server", srv.URL, parent)
	members, removed, _ := strings.Cut(out, "removed from "+parent+" by a topology update")
	if status != 0 || !strings.Contains(out, "group  1 child: 1 RUNNING\n") ||
		!strings.Contains(members, "A1  main/g/s_0") || strings.Contains(members, "A2") ||
		!strings.Contains(removed, "A2  main/g/s_1") || !strings.Contains(removed, "A3  main/g/s_2") {
		t.Fatalf("status of an updated session: exit %d\n%s%s", status, out, errOut)
	}
}
