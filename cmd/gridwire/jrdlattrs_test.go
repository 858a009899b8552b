package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gridwire/gridwire/events"
)

// jrdlJob is a one-job JRDL document running /bin/sh -c script, with extra attributes.
func jrdlJob(script, extra string) string {
	return `<jrdl><job>
<executable><path><stringElement value="/bin/sh"/></path></executable>
<arguments><stringArray><string><stringElement value="-c"/></string><string>` + script + `</string></stringArray></arguments>
` + extra + `</job></jrdl>`
}

// checkJRDLRunTime runs, through the whole gateway on the harness's one cluster, a JRDL
// job past its jobDuration (it must end FAILED saying so), one due in three seconds
// (its program must not run before), and one reading reserved substitution names (they must
// arrive filled with the target's values). The e2e suite runs it on real SSH and Slurm.
func checkJRDLRunTime(t *testing.T, h *harness) {
	t.Helper()
	ids := h.submitJRDL(jrdlJob(`<stringElement value="sleep 300"/>`, `<jobDuration>PT2S</jobDuration>`))
	st := h.waitEnd(ids[0])
	if st.Status != events.StatusFailed || !strings.Contains(st.Reason, "jobDuration PT2S: still running after 2 s, so it was ended") {
		t.Errorf("overrunning job: %s (%s)", st.Status, st.Reason)
	}
	start := time.Now().Add(3 * time.Second).Truncate(time.Second)
	ids = h.submitJRDL(jrdlJob(`<stringElement value="date +%s"/>`,
		`<jobStartTime>`+start.UTC().Format("2006-01-02T15:04:05Z")+`</jobStartTime>`))
	st = h.waitEnd(ids[0])
	out, _ := os.ReadFile(filepath.Join(st.Incarnation.WorkDir, events.StdoutFile))
	if ran, err := strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64); st.Status != events.StatusSucceeded || err != nil || ran < start.Unix() {
		t.Errorf("a job due at %d: %s (%s), ran at %q", start.Unix(), st.Status, st.Reason, out)
	}
	ids = h.submitJRDL(jrdlJob(`<stringElement value="printf %s\\n &quot;$0&quot;"/></string><string><substitutionRef name="JOBID"/><stringElement value=":"/><substitutionRef name="HOME"/>`, ``))
	st = h.waitEnd(ids[0])
	if st.Status != events.StatusSucceeded {
		t.Fatalf("reserved names: %s (%s)", st.Status, st.Reason)
	}
	out, _ = os.ReadFile(filepath.Join(st.Incarnation.WorkDir, events.StdoutFile))
	id, home, _ := strings.Cut(strings.TrimSpace(string(out)), ":")
	if id != ids[0] || !strings.HasPrefix(home, "/") || strings.Contains(string(out), "{") {
		t.Errorf("the job saw %q; want its ID and an absolute HOME", out)
	}
}

// TestJRDLRunTimeOnFork: jobDuration, jobStartTime and reserved names act on a fork
// cluster through the whole gateway.
func TestJRDLRunTimeOnFork(t *testing.T) {
	checkJRDLRunTime(t, newHarness(t))
}
