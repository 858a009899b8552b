package ptp

import (
	"flag"
	"io"
	"net"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/pkg/httpapi"
	"github.com/gridwire/gridwire/pkg/ptpwire"
	"github.com/gridwire/gridwire/services/readside/ptp/ptptest"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

const wait = 20 * time.Second

// TestSession drives a whole session in each form: the model arrives, /bin/echo is
// submitted and completes with exit code 0, sleep is submitted and terminated, events
// stop, the client quits. Each step waits for the client to see the last, so the
// transcript is the same every run; it is compared with testdata/session-<form>.golden.
func TestSession(t *testing.T) {
	for _, f := range []ptpwire.Format{ptpwire.FormatBinary, ptpwire.FormatText} {
		t.Run(f.String(), func(t *testing.T) {
			h := newHarness(t)
			c, err := ptptest.Dial(h.addr, f, "")
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.Record = true
			driveSession(t, h, c)
			golden(t, "testdata/session-"+f.String()+".golden", c.Transcript)
		})
	}
}

func driveSession(t *testing.T, h *harness, c *ptptest.Client) {
	t.Helper()
	must(t, c.Handshake(wait, 1000))
	must(t, c.Wait(wait, "the model", func(c *ptptest.Client) bool { return len(c.Queues) == 2 && len(c.Nodes) == 1 }))
	_, err := c.Must(wait, ptpwire.CmdSubmitJob, "jobSubId=sub-1", "execName=echo", "execPath=/bin", "progArgs=hello", "queueId="+queueID(c, "local/default"))
	must(t, err)
	echo := h.lastJob()
	h.run(echo)
	h.finish(echo, 0)
	// Each wait takes in the process's change too, which follows the job's: the next
	// command must not overtake it in the transcript.
	must(t, c.Wait(wait, "echo completed", func(c *ptptest.Client) bool {
		j, ok := c.Jobs[c.BySubID["sub-1"]]
		return ok && j.Attrs["jobState"] == StateCompleted && j.Proc["processStatus"] == "SUCCEEDED"
	}))
	j, _ := c.Job("sub-1")
	if j.Attrs["jobExitCode"] != "0" || j.Attrs["jobStatus"] != "SUCCEEDED" || j.Proc["processExitCode"] != "0" || j.Proc["processState"] != StateCompleted {
		t.Fatalf("echo: %v, processes %v", j.Attrs, j.Proc)
	}
	if want := []string{"INCARNATED", "QUEUED", "RUNNING", "STAGING_OUT", "SUCCEEDED"}; strings.Join(j.States, " ") != strings.Join(want, " ") {
		t.Fatalf("echo went through %v, want %v", j.States, want)
	}

	_, err = c.Must(wait, ptpwire.CmdSubmitJob, "jobSubId=sub-2", "execName=sleep", "progArgs=60")
	must(t, err)
	sleep := h.lastJob()
	h.run(sleep)
	must(t, c.Wait(wait, "sleep running", func(c *ptptest.Client) bool {
		j, ok := c.Jobs[c.BySubID["sub-2"]]
		return ok && j.Attrs["jobState"] == StateRunning && j.Proc["processStatus"] == "RUNNING"
	}))
	j, _ = c.Job("sub-2")
	_, err = c.Must(wait, ptpwire.CmdTerminateJob, "jobId="+j.ID)
	must(t, err)
	if st, _ := h.store.State(t.Context(), sleep); !st.CancelRequested {
		t.Fatalf("TERMINATE_JOB did not request a cancel: %+v", st)
	}
	h.step(sleep, events.Cancelled, events.EndData{Reason: "cancelled on request"})
	must(t, c.Wait(wait, "sleep cancelled", func(c *ptptest.Client) bool {
		return c.Jobs[j.ID].Attrs["jobStatus"] == "CANCELLED" && c.Jobs[j.ID].Attrs["jobState"] == StateCompleted &&
			c.Jobs[j.ID].Proc["processStatus"] == "CANCELLED"
	}))
	_, err = c.Must(wait, ptpwire.CmdStopEvents)
	must(t, err)
	_, err = c.Must(wait, ptpwire.CmdQuit)
	must(t, err)
}

func queueID(c *ptptest.Client, label string) string {
	var id string
	c.Snapshot(func(c *ptptest.Client) {
		for k, q := range c.Queues {
			if q["name"] == label {
				id = k
			}
		}
	})
	return id
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

var ulid = regexp.MustCompile(`[0-9A-HJKMNP-TV-Z]{26}`)

func golden(t *testing.T, path string, lines []string) {
	t.Helper()
	got := ulid.ReplaceAllString(strings.Join(lines, "\n")+"\n", "<ULID>")
	if *update {
		must(t, os.MkdirAll("testdata", 0o755))
		must(t, os.WriteFile(path, []byte(got), 0o644))
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -update writes it)", err)
	}
	if got != string(want) {
		t.Fatalf("transcript differs from %s:\n%s", path, got)
	}
}

// TestReconnectSameIDs: a client that comes back with the same base ID finds its jobs
// under the same element IDs, and one with another base finds them at the same offsets.
func TestReconnectSameIDs(t *testing.T) {
	h := newHarness(t)
	first, err := ptptest.Dial(h.addr, ptpwire.FormatBinary, "")
	must(t, err)
	must(t, first.Handshake(wait, 500))
	_, err = first.Must(wait, ptpwire.CmdSubmitJob, "jobSubId=a", "execName=true")
	must(t, err)
	h.run(h.lastJob())
	// Wait for the job to be running (its processes known), so both sessions see it in
	// the same state: a snapshot taken as the job first appears can miss its processes.
	must(t, first.Wait(wait, "job running", func(c *ptptest.Client) bool {
		j, ok := c.Jobs[c.BySubID["a"]]
		return ok && j.Attrs["jobState"] == StateRunning && j.Procs.Len() > 0
	}))
	j1, _ := first.Job("a")
	first.Close()

	again, err := ptptest.Dial(h.addr, ptpwire.FormatBinary, "")
	must(t, err)
	defer again.Close()
	must(t, again.Handshake(wait, 500))
	// The job and its processes come in separate events: wait for both, as for the first
	// session (the processes' IDs must be the same; a session that gave others would
	// time out here).
	must(t, again.Wait(wait, "the job again, running, with its processes", func(c *ptptest.Client) bool {
		j, ok := c.Jobs[j1.ID]
		return ok && j.Attrs["jobState"] == StateRunning && j.Procs.String() == j1.Procs.String()
	}))
	j2, _ := again.JobByID(j1.ID)
	if j2.Attrs["gridwireJobId"] != j1.Attrs["gridwireJobId"] || j2.Procs.String() != j1.Procs.String() {
		t.Fatalf("reconnect: %v %s, first %v %s", j2.Attrs, j2.Procs, j1.Attrs, j1.Procs)
	}
	if _, ok := j2.Attrs["jobSubId"]; ok {
		t.Fatal("another session was told the submission ID")
	}
}

// TestBadInput: commands out of phase and unknown ones get an ERROR; a frame that breaks
// the stream closes that connection only.
func TestBadInput(t *testing.T) {
	h := newHarness(t)
	c, err := ptptest.Dial(h.addr, ptpwire.FormatBinary, "")
	must(t, err)
	defer c.Close()
	for _, cmd := range []ptpwire.Command{ptpwire.CmdStartEvents, ptpwire.CmdSubmitJob} {
		r, err := c.Call(wait, cmd, "jobSubId=x")
		must(t, err)
		if last := r[len(r)-1]; last.ID != ptpwire.EvError || !strings.Contains(strings.Join(last.Args, " "), "before INIT") {
			t.Fatalf("%v before INIT: %v", cmd, r)
		}
	}
	must(t, c.Handshake(wait, 1))
	r, err := c.Call(wait, ptpwire.CmdInit, "version=2.0", "baseId=1")
	must(t, err)
	if r[0].ID != ptpwire.EvError {
		t.Fatalf("second INIT: %v", r)
	}
	for id, cmd := range map[int]ptpwire.Command{99: ptpwire.CmdUnknown, 7: ptpwire.CmdFilterEvents, 12: ptpwire.CmdGetAttributes} {
		tid, err := c.SendRaw(id, cmd)
		must(t, err)
		must(t, c.Wait(wait, "an answer", func(c *ptptest.Client) bool { return true }))
		_ = tid
	}
	_, err = c.Must(wait, ptpwire.CmdSuspendEvents)
	must(t, err)
	_, err = c.Must(wait, ptpwire.CmdResumeEvents)
	must(t, err)
	_, err = c.Must(wait, ptpwire.CmdSetFilters, "stdout", "stderr")
	must(t, err)
	r, err = c.Call(wait, ptpwire.CmdTerminateJob, "jobId=77")
	must(t, err)
	if r[0].ID != ptpwire.EvTerminateJobError {
		t.Fatalf("terminate of no job: %v", r)
	}

	for _, junk := range []string{"\x7f\xff\xff\xff", "\x00\x00\x00\x08\x40\x00\x00\x00\x09\x00\x00\x00", "00000017 0001-00000001:0000"} {
		raw, err := net.Dial("tcp", h.addr)
		must(t, err)
		_, _ = raw.Write([]byte(junk))
		_ = raw.(*net.TCPConn).CloseWrite() // a frame cut short by the end of the stream
		_ = raw.SetReadDeadline(time.Now().Add(wait))
		if _, err := io.ReadAll(raw); err != nil {
			t.Fatalf("%q: connection not closed: %v", junk, err)
		}
		raw.Close()
	}
	if err := c.Err(); err != nil {
		t.Fatalf("the first session suffered: %v", err)
	}
	_, err = c.Must(wait, ptpwire.CmdQuit)
	must(t, err)
}

// TestHoldResumeAndFlowControl: the document's CHANGE_JOB holds and resumes through the
// control owner (text form); PTP 5's SUSPEND_EVENTS stops model events until
// RESUME_EVENTS, after which the changes made meanwhile arrive in order.
func TestHoldResumeAndFlowControl(t *testing.T) {
	h := newHarness(t)
	txt, err := ptptest.Dial(h.addr, ptpwire.FormatText, "")
	must(t, err)
	defer txt.Close()
	must(t, txt.Handshake(wait, 10))
	_, err = txt.Must(wait, ptpwire.CmdSubmitJob, "jobSubId=h", "execName=sleep")
	must(t, err)
	id := h.lastJob()
	h.run(id)
	must(t, txt.Wait(wait, "running", func(c *ptptest.Client) bool { return c.BySubID["h"] != "" }))
	j, _ := txt.Job("h")
	_, err = txt.Must(wait, ptpwire.CmdChangeJob, "jobId="+j.ID, "jobState=SUSPENDED")
	must(t, err)
	if st, _ := h.store.State(t.Context(), id); !st.HoldRequested {
		t.Fatalf("CHANGE_JOB jobState=SUSPENDED did not request a hold: %+v", st)
	}
	r, err := txt.Call(wait, ptpwire.CmdChangeJob, "jobId="+j.ID, "name=other")
	must(t, err)
	if r[0].ID != ptpwire.EvError {
		t.Fatalf("CHANGE_JOB of a name: %v", r)
	}
	r, err = txt.Call(wait, ptpwire.CmdMoveJob, "jobId="+j.ID, "queueId=1")
	must(t, err)
	if r[0].ID != ptpwire.EvError || !strings.Contains(r[0].Args[2], "MOVE_JOB is not implemented") {
		t.Fatalf("MOVE_JOB: %v", r)
	}

	bin, err := ptptest.Dial(h.addr, ptpwire.FormatBinary, "")
	must(t, err)
	defer bin.Close()
	must(t, bin.Handshake(wait, 10))
	must(t, bin.Wait(wait, "the job", func(c *ptptest.Client) bool { _, ok := c.Jobs[j.ID]; return ok }))
	_, err = bin.Must(wait, ptpwire.CmdSuspendEvents)
	must(t, err)
	var before int
	bin.Snapshot(func(c *ptptest.Client) { before = c.Events })
	h.step(id, events.Exited, events.ExitedData{ExitCode: 3})
	must(t, txt.Wait(wait, "the text session sees the exit", func(c *ptptest.Client) bool { return c.Jobs[j.ID].Attrs["jobExitCode"] == "3" }))
	bin.Snapshot(func(c *ptptest.Client) {
		if c.Events != before {
			t.Errorf("%d events arrived while suspended", c.Events-before)
		}
	})
	_, err = bin.Must(wait, ptpwire.CmdResumeEvents)
	must(t, err)
	must(t, bin.Wait(wait, "the exit after resuming", func(c *ptptest.Client) bool { return c.Jobs[j.ID].Attrs["jobExitCode"] == "3" }))
}

// TestFallingBehind: a session that does not take the model's changes for longer than the
// endpoint keeps them is told so in a FATAL MESSAGE and closed, rather than sent a model
// with a hole in it; others go on.
func TestFallingBehind(t *testing.T) {
	h := newHarnessWith(t, Config{MaxChanges: 4})
	slow, err := ptptest.Dial(h.addr, ptpwire.FormatBinary, "")
	must(t, err)
	defer slow.Close()
	slow.Record = true
	must(t, slow.Handshake(wait, 10))
	must(t, slow.Wait(wait, "the model", func(c *ptptest.Client) bool { return len(c.Queues) == 2 }))
	_, err = slow.Must(wait, ptpwire.CmdSuspendEvents)
	must(t, err)
	for i := 0; i < 3; i++ {
		_, err := h.ingest.Submit(t.Context(), []byte(`["execName=true"]`), "x", httpapi.Grant{Principal: "t"})
		must(t, err)
		h.run(h.lastJob())
		h.finish(h.lastJob(), 0)
	}
	if _, err := slow.Send(ptpwire.CmdResumeEvents); err != nil {
		t.Fatal(err)
	}
	err = slow.Wait(wait, "the session to close", func(c *ptptest.Client) bool { return false })
	var transcript string
	slow.Snapshot(func(c *ptptest.Client) { transcript = strings.Join(c.Transcript, "\n") })
	if err == nil || !strings.Contains(transcript, "fell too far behind") {
		t.Fatalf("slow session: %v\n%s", err, transcript)
	}
	for deadline := time.Now().Add(wait); ; time.Sleep(10 * time.Millisecond) { // the model has it all
		views, _ := h.svc.model.snapshot()
		if ended := len(views) == 3 && views[0].Ended && views[1].Ended && views[2].Ended; ended {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the model did not fold the three jobs")
		}
	}
	fresh, err := ptptest.Dial(h.addr, ptpwire.FormatBinary, "")
	must(t, err)
	defer fresh.Close()
	must(t, fresh.Handshake(wait, 10))
	must(t, fresh.Wait(wait, "three completed jobs", func(c *ptptest.Client) bool { return c.Completed == 3 }))
}
