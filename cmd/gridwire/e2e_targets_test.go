//go:build e2e

package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/pkg/cluster"
	"github.com/gridwire/gridwire/pkg/sshx/sshtest"
	"golang.org/x/crypto/ssh"
)

// The end-to-end suite (run by .ci/e2e, which starts Slurm and exports SLURM_CONF):
// the whole pipeline against a real OpenSSH sshd and a real single-node Slurm.

func hasStatus(s events.Status) func(events.State) bool {
	return func(st events.State) bool { return st.Status == s }
}

// gatedIn is a job that runs until the file "release" appears in its working
// directory, then exits with the code written there.
func gatedIn() map[string]any {
	return map[string]any{"version": 3, "executable": "/bin/sh",
		"arguments": []string{"-c", `while [ ! -s release ]; do sleep 0.05; done; exit "$(cat release)"`}}
}

// A real OpenSSH sshd with key-only login: jobs run on the host through the fork
// profile, the verified host key is in the history, hold/resume/cancel work remotely.
func TestE2EOpenSSHCluster(t *testing.T) {
	srv := sshtest.StartOpenSSH(t)
	cfg := cluster.Config{Clusters: []cluster.Cluster{{Name: "remote", Kind: cluster.KindSSH, Hosts: []string{srv.Addr},
		User: srv.User, Identity: srv.ClientKeyFile, KnownHosts: srv.KnownHostsFile, Profile: "fork", LRMS: "Fork",
		WorkRoot: srv.Dir, Fields: map[string]string{"KILL_WAIT": "1"}}}}
	files, target := t.TempDir(), filepath.Join(srv.Dir, "target") // target: on the SSH host, writable by its user
	h := newHarnessWith(t, withRoots(t, cfg, files, target))

	id := h.submitJSON(map[string]any{"version": 3, "executable": "/bin/sh", "arguments": []string{"-c", "id -un"}})
	st := h.waitEnd(id)
	if st.Status != events.StatusSucceeded {
		t.Fatalf("state %s (%s)", st.Status, st.Reason)
	}
	out, err := os.ReadFile(filepath.Join(st.Incarnation.WorkDir, events.StdoutFile))
	if err != nil || strings.TrimSpace(string(out)) != srv.User {
		t.Errorf("stdout %q (%v); want the job run as %s", out, err, srv.User)
	}
	run := h.started(id)
	if want := ssh.FingerprintSHA256(srv.HostKey(t, "ed25519")); run.HostKey != want || run.Host != srv.Addr {
		t.Errorf("started on %s with host key %q; want %s with %s", run.Host, run.HostKey, srv.Addr, want)
	}
	h.assertCleanHistory(id)

	id = h.submitJSON(gatedIn())
	st = h.waitFor(id, "RUNNING", isRunning)
	h.request(id, events.HoldRequested)
	h.waitFor(id, "HELD", hasStatus(events.StatusHeld))
	h.request(id, events.ResumeRequested)
	h.waitFor(id, "RUNNING again", func(s events.State) bool { return s.Status == events.StatusRunning && s.HeldFrom == "" })
	h.request(id, events.CancelRequested)
	st = h.waitEnd(id)
	if st.Status != events.StatusCancelled {
		t.Fatalf("state %s (%s), want CANCELLED", st.Status, st.Reason)
	}
	h.assertCleanHistory(id)

	t.Run("a cancel and a job's end leave nothing running", func(t *testing.T) { checkJobsLeaveNothingRunning(t, h) })
	t.Run("JSDL limits", func(t *testing.T) { checkJSDLLimits(t, h) })
	t.Run("JRDL times and reserved names", func(t *testing.T) { checkJRDLRunTime(t, h) })
	t.Run("JRDL directory, staging and cleanup", func(t *testing.T) { checkJRDLDirectory(t, h, files) })
	t.Run("JRDL absolute directory and cleanup path", func(t *testing.T) { checkJRDLAbsoluteDirectory(t, h, files, target) })
	t.Run("group hold, resume and cancel", func(t *testing.T) { checkGroupControl(t, h) })
	t.Run("co-allocated subjob fails: its sibling is ended", func(t *testing.T) { checkCoallocationAbort(t, h) })
	t.Run("co-allocation policy continue", func(t *testing.T) { checkCoallocationContinue(t, h) })
}

// checkGroupControl: hold, resume and cancel on a two-job document's parent reach both
// children running on the harness's cluster, and the parent follows them.
func checkGroupControl(t *testing.T, h *harness) {
	t.Helper()
	ids := h.submitJRDL("<jrdl>\n" + jrdlGated("job", "") + jrdlGated("job", "") + "</jrdl>")
	for _, id := range ids[1:] {
		h.waitFor(id, "RUNNING", isRunning)
	}
	isHeld := func(st events.State) bool { return st.Status == events.StatusHeld }
	h.request(ids[0], events.HoldRequested)
	for _, id := range ids {
		h.waitFor(id, "HELD", isHeld)
	}
	h.request(ids[0], events.ResumeRequested)
	for _, id := range ids {
		h.waitFor(id, "RUNNING again", func(st events.State) bool { return st.Status == events.StatusRunning && st.HeldFrom == "" })
	}
	h.request(ids[0], events.CancelRequested)
	for _, id := range ids[1:] {
		if st := h.waitEnd(id); st.Status != events.StatusCancelled {
			t.Fatalf("child %s %s (%s), want CANCELLED", id, st.Status, st.Reason)
		}
	}
	if st := h.waitEnd(ids[0]); st.Status != events.StatusCancelled || counts(st)[events.StatusCancelled] != 2 {
		t.Fatalf("parent %s %+v, want CANCELLED with 2 CANCELLED", st.Status, st.Group)
	}
}

// checkCoallocationAbort: under the default policy a co-allocated subjob that fails
// while its sibling runs ends the sibling, naming it; the parent fails.
func checkCoallocationAbort(t *testing.T, h *harness) {
	t.Helper()
	ids := h.submitJRDL("<jrdl>\n<job>\n" + jrdlGated("subjob", "") + jrdlGated("subjob", "") + "</job>\n</jrdl>")
	a, b := ids[1], ids[2]
	h.waitFor(a, "RUNNING", isRunning)
	h.waitFor(b, "RUNNING", isRunning)
	h.release(b, "4")
	if st := h.waitEnd(a); st.Status != events.StatusCancelled || !strings.Contains(st.Reason, "co-allocated subjob "+b) {
		t.Fatalf("running sibling %s %q, want CANCELLED naming subjob %s", st.Status, st.Reason, b)
	}
	if p := h.waitEnd(ids[0]); p.Status != events.StatusFailed {
		t.Fatalf("parent %s, want FAILED", p.Status)
	}
}

// slurmCluster is the single-node Slurm that .ci/e2e started, reached from this host.
func slurmCluster(t *testing.T) cluster.Cluster {
	t.Helper()
	if os.Getenv("SLURM_CONF") == "" {
		t.Fatal("SLURM_CONF is not set: run the end-to-end suite with .ci/e2e, which starts Slurm")
	}
	root, err := os.MkdirTemp("", "gw-e2e-slurm-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	return cluster.Cluster{Name: "hpc", Kind: cluster.KindFork, Profile: "slurm", LRMS: "Slurm", Queues: []string{"debug"}, WorkRoot: root}
}

func scontrol(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command("scontrol", args...).CombinedOutput(); err != nil {
		t.Fatalf("scontrol %v: %v %s", args, err, out)
	}
}

// squeueLine is what squeue says of a native ID ("" once it left the queue).
func squeueLine(t *testing.T, id string) string {
	t.Helper()
	out, _ := exec.Command("squeue", "-h", "-j", id, "-o", "%T %r").Output()
	return strings.TrimSpace(string(out))
}

// checkBatchCompletion: a job on the harness's batch cluster runs to completion with its
// output, its queued native ID recorded, and a failing one arrives with its exit code.
func checkBatchCompletion(t *testing.T, h *harness, lrms string) {
	id := h.submitJSON(map[string]any{"version": 3, "executable": "/bin/sh", "arguments": []string{"-c", "echo from " + lrms + "; exit 0"}})
	st := h.waitEnd(id)
	if st.Status != events.StatusSucceeded {
		t.Fatalf("state %s (%s)", st.Status, st.Reason)
	}
	if out, _ := os.ReadFile(filepath.Join(st.Incarnation.WorkDir, events.StdoutFile)); string(out) != "from "+lrms+"\n" {
		t.Errorf("stdout %q", out)
	}
	if run := h.started(id); run.Running || run.NativeID == "" || run.NativeID != st.NativeID {
		t.Errorf("started %+v; want a queued job ID from the batch system", run)
	}
	failed := h.submitJSON(map[string]any{"version": 3, "executable": "/bin/sh", "arguments": []string{"-c", "exit 3"}})
	if st := h.waitEnd(failed); st.Status != events.StatusFailed || st.ExitCode == nil || *st.ExitCode != 3 {
		t.Errorf("state %s exit %v; want FAILED with the exit status file's 3", st.Status, st.ExitCode)
	}
	h.assertCleanHistory(id)
}

// checkBatchCancel: a running job (the batch system says running) is cancelled through
// the profile's ABORT, and leaves Slurm's queue (both batch profiles run on Slurm here).
func checkBatchCancel(t *testing.T, h *harness, running string) {
	id := h.submitJSON(gatedIn())
	st := h.waitFor(id, running+" in the batch system", func(s events.State) bool { return s.Status == events.StatusRunning && s.NativeState == running })
	h.request(id, events.CancelRequested)
	if st = h.waitEnd(id); st.Status != events.StatusCancelled {
		t.Fatalf("state %s (%s)", st.Status, st.Reason)
	}
	waitUntil(t, "the job to leave the queue", func() bool { return squeueLine(t, st.NativeID) == "" })
	h.assertCleanHistory(id)
}

// checkBatchGroupCancel: cancel on a JRDL document's parent cancels its two running
// children, each leaves the queue, and the parent ends CANCELLED with their counts.
func checkBatchGroupCancel(t *testing.T, h *harness, running string) {
	ids := h.submitJRDL(jrdlTwoSleepers)
	for _, id := range ids[1:] {
		h.waitFor(id, running+" in the batch system", func(s events.State) bool { return s.Status == events.StatusRunning && s.NativeState == running })
	}
	h.request(ids[0], events.CancelRequested)
	for _, id := range ids[1:] {
		st := h.waitEnd(id)
		if st.Status != events.StatusCancelled {
			t.Fatalf("child %s %s (%s), want CANCELLED", id, st.Status, st.Reason)
		}
		waitUntil(t, "the child to leave the queue", func() bool { return squeueLine(t, st.NativeID) == "" })
	}
	if st := h.waitEnd(ids[0]); st.Status != events.StatusCancelled || st.Group == nil || st.Group.Counts[events.StatusCancelled] != 2 {
		t.Fatalf("parent %s %+v, want CANCELLED with 2 children CANCELLED", st.Status, st.Group)
	}
}

// checkBatchCoallocated: of two co-allocated subjobs, the failing one ends FAILED, the
// sleeping one, started in the batch system, is CANCELLED naming it and leaves the queue,
// and the parent FAILS.
func checkBatchCoallocated(t *testing.T, h *harness) {
	ids := h.submitJRDL(jrdlCoallocated)
	if st := h.waitEnd(ids[2]); st.Status != events.StatusFailed {
		t.Fatalf("failing subjob %s (%s), want FAILED", st.Status, st.Reason)
	}
	st := h.waitEnd(ids[1])
	if st.Status != events.StatusCancelled || !strings.Contains(st.Reason, "co-allocated subjob "+ids[2]) || st.NativeID == "" {
		t.Fatalf("sleeping subjob %s %q native %q, want started in the batch system and CANCELLED naming its sibling", st.Status, st.Reason, st.NativeID)
	}
	waitUntil(t, "the sibling to leave the queue", func() bool { return squeueLine(t, st.NativeID) == "" })
	if p := h.waitEnd(ids[0]); p.Status != events.StatusFailed {
		t.Fatalf("parent %s, want FAILED", p.Status)
	}
}

// Jobs submitted through the slurm profile run to completion, are cancelled, and are
// held and released, on a real Slurm.
func TestE2ESlurm(t *testing.T) {
	files := t.TempDir()
	h := newHarnessWith(t, withFileRoot(t, cluster.Config{Clusters: []cluster.Cluster{slurmCluster(t)}}, files))

	t.Run("completion", func(t *testing.T) { checkBatchCompletion(t, h, "slurm") })
	t.Run("cancel", func(t *testing.T) { checkBatchCancel(t, h, "RUNNING") })

	t.Run("hold and release", func(t *testing.T) {
		scontrol(t, "update", "PartitionName=debug", "State=DOWN")
		t.Cleanup(func() { scontrol(t, "update", "PartitionName=debug", "State=UP") })
		id := h.submitJSON(map[string]any{"version": 3, "executable": "/bin/true"})
		st := h.waitFor(id, "queued in Slurm", func(s events.State) bool { return s.NativeID != "" })
		h.request(id, events.HoldRequested)
		st = h.waitFor(id, "HELD, as Slurm says", func(s events.State) bool { return s.Status == events.StatusHeld && s.NativeState == "HELD" })
		if line := squeueLine(t, st.NativeID); !strings.Contains(line, "JobHeld") {
			t.Fatalf("squeue says %q of the held job", line)
		}
		scontrol(t, "update", "PartitionName=debug", "State=UP")
		if line := squeueLine(t, st.NativeID); !strings.HasPrefix(line, "PENDING") {
			t.Fatalf("a held job left PENDING when its partition came up: %q", line)
		}
		resumeToSuccess(t, h, id)
	})

	t.Run("JSDL limits", func(t *testing.T) { checkJSDLLimits(t, h) })
	t.Run("JRDL times and reserved names", func(t *testing.T) { checkJRDLRunTime(t, h) })
	t.Run("JRDL directory, staging and cleanup", func(t *testing.T) { checkJRDLDirectory(t, h, files) })

	t.Run("jobStartBefore passes while queued", func(t *testing.T) {
		scontrol(t, "update", "PartitionName=debug", "State=DOWN")
		t.Cleanup(func() { scontrol(t, "update", "PartitionName=debug", "State=UP") })
		ids := h.submitJRDL(jrdlJob(`<stringElement value="true"/>`, `<jobStartBefore>PT4S</jobStartBefore>`))
		queued := h.waitFor(ids[0], "pending in Slurm", func(s events.State) bool { return s.NativeID != "" })
		st := h.waitEnd(ids[0])
		if st.Status != events.StatusFailed || !strings.Contains(st.Reason, "jobStartBefore: the job had not started by") ||
			!strings.Contains(st.Reason, "queue") {
			t.Fatalf("%s (%s); want FAILED, cancelled in the queue past its start deadline", st.Status, st.Reason)
		}
		waitUntil(t, "scancel to take the job out of the queue", func() bool { return squeueLine(t, queued.NativeID) == "" })
		h.assertCleanHistory(ids[0])
	})

	t.Run("group cancel", func(t *testing.T) { checkBatchGroupCancel(t, h, "RUNNING") })

	t.Run("co-allocated subjobs", func(t *testing.T) { checkBatchCoallocated(t, h) })

	t.Run("co-allocated subjobs as one heterogeneous job", func(t *testing.T) { checkHetjob(t, h) })
}

// jrdlHetjob is one job of two co-allocated subjobs that print their name, then wait
// for a release file in their working directory and exit with its content.
func jrdlHetjob() string {
	sub := func(name string) string {
		return `    <subjob>
      <arguments><stringArray><string><stringElement value="-c"/></string>
        <string><stringElement value="echo from ` + name + `; while [ ! -s release ]; do sleep 0.02; done; exit &quot;$(cat release)&quot;"/></string></stringArray></arguments>
    </subjob>
`
	}
	return "<jrdl>\n  <job>\n    <executable><path><stringElement value=\"/bin/sh\"/></path></executable>\n" +
		sub("a") + sub("b") + "  </job>\n</jrdl>\n"
}

// checkHetjob: two co-allocated subjobs on the Slurm cluster run as one heterogeneous
// job (components LEADER+0 and LEADER+1, as squeue names them), each with its own
// output; when one component fails, the other is ended and the job fails.
func checkHetjob(t *testing.T, h *harness) {
	t.Helper()
	run := func() (ids []string, leader string) {
		ids = h.submitJRDL(jrdlHetjob())
		var native []string
		for _, id := range ids[1:] {
			st := h.waitFor(id, "RUNNING in Slurm", func(s events.State) bool { return s.Status == events.StatusRunning && s.NativeState == "RUNNING" })
			native = append(native, st.NativeID)
		}
		leader, _, _ = strings.Cut(native[0], "+")
		if native[0] != leader+"+0" || native[1] != leader+"+1" {
			t.Fatalf("native IDs %v; want the components LEADER+0 and LEADER+1 of one job", native)
		}
		out, err := exec.Command("squeue", "-h", "-j", leader, "-o", "%i %T").Output()
		if err != nil || !strings.Contains(string(out), leader+"+0 RUNNING") || !strings.Contains(string(out), leader+"+1 RUNNING") {
			t.Fatalf("squeue -j %s: %q (%v); want both components running", leader, out, err)
		}
		return ids, leader
	}

	ids, _ := run()
	h.release(ids[1], "0")
	h.release(ids[2], "0")
	for i, id := range ids[1:] {
		st := h.waitEnd(id)
		if st.Status != events.StatusSucceeded {
			t.Fatalf("subjob %s %s (%s), want SUCCEEDED", id, st.Status, st.Reason)
		}
		want := "from " + string(rune('a'+i)) + "\n"
		if out, _ := os.ReadFile(filepath.Join(st.Incarnation.WorkDir, events.StdoutFile)); string(out) != want {
			t.Errorf("subjob %s stdout %q, want %q", id, out, want)
		}
		h.assertCleanHistory(id)
	}
	if p := h.waitEnd(ids[0]); p.Status != events.StatusSucceeded {
		t.Fatalf("parent %s (%s), want SUCCEEDED", p.Status, p.Reason)
	}

	ids, leader := run()
	h.release(ids[2], "3")
	if st := h.waitEnd(ids[2]); st.Status != events.StatusFailed || st.ExitCode == nil || *st.ExitCode != 3 {
		t.Fatalf("failing component %s exit %v (%s), want FAILED with 3", st.Status, st.ExitCode, st.Reason)
	}
	if st := h.waitEnd(ids[1]); st.Status != events.StatusCancelled || !strings.Contains(st.Reason, "co-allocated subjob "+ids[2]) {
		t.Fatalf("other component %s %q, want CANCELLED naming subjob %s", st.Status, st.Reason, ids[2])
	}
	waitUntil(t, "scancel to end the heterogeneous job", func() bool {
		out, _ := exec.Command("squeue", "-h", "-j", leader, "-t", "PENDING,RUNNING", "-o", "%i").Output()
		return strings.TrimSpace(string(out)) == ""
	})
	if p := h.waitEnd(ids[0]); p.Status != events.StatusFailed {
		t.Fatalf("parent %s, want FAILED", p.Status)
	}
}

// waitUntil polls cond; the bound only keeps a broken test from hanging.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); !cond(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("waited 60s for %s", what)
		}
	}
}

// resumeToSuccess resumes a held job and checks that it then SUCCEEDED, with one held
// and one resumed event in a clean history.
func resumeToSuccess(t *testing.T, h *harness, id string) {
	t.Helper()
	h.request(id, events.ResumeRequested)
	if st := h.waitEnd(id); st.Status != events.StatusSucceeded {
		t.Fatalf("state %s (%s)", st.Status, st.Reason)
	}
	names := map[events.Name]int{}
	for _, e := range h.history(id) {
		names[e.Name]++
	}
	if names[events.Held] != 1 || names[events.Resumed] != 1 {
		t.Errorf("history counts %v; want one held and one resumed", names)
	}
	h.assertCleanHistory(id)
}
