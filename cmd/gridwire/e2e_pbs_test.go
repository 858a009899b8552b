//go:build e2e

package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/pkg/cluster"
)

// pbsCluster runs the shipped pbs profile (LRMS PBS) against the qsub, qstat, qdel,
// qhold and qrls of Debian's slurm-wlm-torque: Slurm's Torque/PBS wrappers, on the
// single-node Slurm .ci/e2e starts. That is real PBS command lines and real qstat -f
// output, not a real pbs_server (docs/operations.md says what that does not cover).
func pbsCluster(t *testing.T) cluster.Cluster {
	t.Helper()
	for _, tool := range []string{"qsub", "qstat", "qdel", "qhold", "qrls"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s: %v; scripts/install-slurm.sh installs slurm-wlm-torque", tool, err)
		}
	}
	c := slurmCluster(t)
	c.Name, c.Profile, c.LRMS = "pbs", "pbs", "PBS"
	return c
}

// qstatState is the job_state the wrapper's qstat -f prints of a native ID ("" once
// Slurm forgot the job).
func qstatState(t *testing.T, id string) string {
	t.Helper()
	out, _ := exec.Command("qstat", "-f", id).Output()
	for _, line := range strings.Split(string(out), "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), " = "); ok && k == "job_state" {
			return v
		}
	}
	return ""
}

// Jobs submitted through the shipped PBS profile run to completion with their output and
// exit code, are cancelled with qdel, held with qhold and released with qrls, get their
// walltime and CPUs, are cancelled in the queue past a jobStartBefore, and act as JRDL
// groups and co-allocated subjobs, on Slurm through its Torque wrappers.
func TestE2EPBSWrappers(t *testing.T) {
	files := t.TempDir()
	h := newHarnessWith(t, withFileRoot(t, cluster.Config{Clusters: []cluster.Cluster{pbsCluster(t)}}, files))

	t.Run("completion", func(t *testing.T) { checkBatchCompletion(t, h, "pbs") })
	t.Run("qdel of a running job", func(t *testing.T) { checkBatchCancel(t, h, "R") })

	t.Run("JRDL directory, staging and cleanup", func(t *testing.T) { checkJRDLDirectory(t, h, files) })

	t.Run("jobStartBefore passes while queued", func(t *testing.T) {
		scontrol(t, "update", "PartitionName=debug", "State=DOWN")
		t.Cleanup(func() { scontrol(t, "update", "PartitionName=debug", "State=UP") })
		ids := h.submitJRDL(jrdlJob(`<stringElement value="true"/>`, `<jobStartBefore>PT4S</jobStartBefore>`))
		queued := h.waitFor(ids[0], "Q in qstat", func(s events.State) bool { return s.NativeID != "" && s.NativeState == "Q" })
		st := h.waitEnd(ids[0])
		if st.Status != events.StatusFailed || !strings.Contains(st.Reason, "jobStartBefore: the job had not started by") ||
			!strings.Contains(st.Reason, "queue") {
			t.Fatalf("%s (%s); want FAILED, cancelled in the queue past its start deadline", st.Status, st.Reason)
		}
		waitUntil(t, "qdel to take the job out of the queue", func() bool { return squeueLine(t, queued.NativeID) == "" })
		h.assertCleanHistory(ids[0])
	})

	t.Run("qhold while queued and qrls", func(t *testing.T) {
		scontrol(t, "update", "PartitionName=debug", "State=DOWN")
		t.Cleanup(func() { scontrol(t, "update", "PartitionName=debug", "State=UP") })
		id := h.submitJSON(map[string]any{"version": 3, "executable": "/bin/true"})
		st := h.waitFor(id, "Q in qstat", func(s events.State) bool { return s.NativeID != "" && s.NativeState == "Q" })
		h.request(id, events.HoldRequested)
		st = h.waitFor(id, "HELD after qhold", func(s events.State) bool { return s.Status == events.StatusHeld })
		if line := squeueLine(t, st.NativeID); !strings.Contains(line, "JobHeld") {
			t.Fatalf("squeue says %q of the job qhold held", line)
		}
		// The wrapper's qstat prints a held job as Q (real PBS: H); gridwire keeps it HELD,
		// as a poll answered just before a hold took effect also says queued.
		if q := qstatState(t, st.NativeID); q != "Q" && q != "H" {
			t.Fatalf("qstat job_state %q of a held job", q)
		}
		scontrol(t, "update", "PartitionName=debug", "State=UP")
		if line := squeueLine(t, st.NativeID); !strings.HasPrefix(line, "PENDING") {
			t.Fatalf("a held job left PENDING when its partition came up: %q", line)
		}
		if st = h.waitFor(id, "the current state", func(events.State) bool { return true }); st.Status != events.StatusHeld {
			t.Fatalf("state %s (%s) before the resume; want HELD", st.Status, st.Reason)
		}
		resumeToSuccess(t, h, id)
	})

	// qsub gets one -l select=1:ncpus=N,walltime=H:M:S: the wrapper keeps only the last -l
	// and turns the walltime into Slurm's minutes (rounded up) and select/ncpus into -N/--mincpus.
	// jobStartTime (qsub -a [[CC]YY]MMDDhhmm[.SS]) is not run here: the wrapper hands
	// -a to sbatch --begin unchanged, which refuses PBS's format.
	t.Run("jobDuration as qsub's walltime, and ended when overrun", func(t *testing.T) {
		scontrol(t, "update", "PartitionName=debug", "State=DOWN")
		t.Cleanup(func() { scontrol(t, "update", "PartitionName=debug", "State=UP") })
		ids := h.submitJRDL(jrdlJob(`<stringElement value="true"/>`, `<count><integer value="2"/></count><jobDuration>PT90S</jobDuration>`))
		st := h.waitFor(ids[0], "queued by qsub", func(s events.State) bool { return s.NativeID != "" })
		out, _ := exec.Command("squeue", "-h", "-j", st.NativeID, "-o", "%l %D %c").Output()
		if got := strings.TrimSpace(string(out)); got != "2:00 1 2" {
			t.Errorf("squeue time limit, nodes, minimum CPUs per node %q; want 2:00 1 2 from -l select=1:ncpus=2,walltime=0:1:30", got)
		}
		h.request(ids[0], events.CancelRequested)
		if st = h.waitEnd(ids[0]); st.Status != events.StatusCancelled {
			t.Fatalf("state %s (%s)", st.Status, st.Reason)
		}
		scontrol(t, "update", "PartitionName=debug", "State=UP")
		ids = h.submitJRDL(jrdlJob(`<stringElement value="sleep 300"/>`, `<jobDuration>PT2S</jobDuration>`))
		if st = h.waitEnd(ids[0]); st.Status != events.StatusFailed || !strings.Contains(st.Reason, "jobDuration PT2S: still running after 2 s, so it was ended") {
			t.Errorf("overrunning job: %s (%s)", st.Status, st.Reason)
		}
		waitUntil(t, "qdel to take the overrunning job out of the queue", func() bool { return squeueLine(t, st.NativeID) == "" })
	})

	t.Run("reserved names filled on the target", func(t *testing.T) {
		ids := h.submitJRDL(jrdlJob(`<stringElement value="printf %s\\n &quot;$0&quot;"/></string><string><substitutionRef name="JOBID"/><stringElement value=":"/><substitutionRef name="HOME"/>`, ``))
		st := h.waitEnd(ids[0])
		if st.Status != events.StatusSucceeded {
			t.Fatalf("reserved names: %s (%s)", st.Status, st.Reason)
		}
		out, _ := os.ReadFile(filepath.Join(st.Incarnation.WorkDir, events.StdoutFile))
		id, home, _ := strings.Cut(strings.TrimSpace(string(out)), ":")
		if id != ids[0] || !strings.HasPrefix(home, "/") || strings.Contains(string(out), "{") {
			t.Errorf("the job saw %q; want its ID and an absolute HOME", out)
		}
	})

	t.Run("group cancel", func(t *testing.T) { checkBatchGroupCancel(t, h, "R") })

	t.Run("co-allocated subjobs", func(t *testing.T) { checkBatchCoallocated(t, h) })
}
