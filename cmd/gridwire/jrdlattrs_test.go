package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/pkg/cluster"
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

// withFileRoot opens root to every job for reading and writing (stager.file_roots), and
// the gateway-side temporary directory's "target" beside it as a target path
// (stager.target_paths) for absolute job directories on this machine.
func withFileRoot(t *testing.T, cfg cluster.Config, root string) cluster.Config {
	t.Helper()
	return withRoots(t, cfg, root, root+"-target")
}

// withRoots opens files (on the gateway) and target (on the cluster's target) to every
// job for reading and writing.
func withRoots(t *testing.T, cfg cluster.Config, files, target string) cluster.Config {
	t.Helper()
	rw := func(p string) []map[string]string { return []map[string]string{{"path": p, "access": "read-write"}} }
	if err := cfg.Stager.Encode(map[string]any{"file_roots": rw(files), "target_paths": rw(target)}); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// checkJRDLAbsoluteDirectory runs a job whose <directory> is an absolute path inside the
// target path target: its input is staged in there, it runs there, its STDOUT lands there
// and an absolute cleanup path inside it is removed. The e2e suite runs it on real SSH.
func checkJRDLAbsoluteDirectory(t *testing.T, h *harness, files, target string) {
	t.Helper()
	src, dst := filepath.Join(files, "abs-in.txt"), filepath.Join(files, "abs-out-"+strconv.FormatInt(time.Now().UnixNano(), 36))
	if err := os.WriteFile(src, []byte("absolute\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(target, "run-"+strconv.FormatInt(time.Now().UnixNano(), 36))
	ids := h.submitJRDL(jrdlJob(`<stringElement value="cat in.txt &gt; copy.txt; pwd"/>`, `
<directory><path><stringElement value="`+dir+`"/></path></directory>
<stdout><pathArray><path><stringElement value="STDOUT"/></path></pathArray></stdout>
<fileStageIn><fileInputArray><fileInput><url><urlElement value="file://`+src+`"/></url><path><stringElement value="in.txt"/></path></fileInput></fileInputArray></fileStageIn>
<fileStageOut><fileOutputArray><fileOutput><path><stringElement value="copy.txt"/></path><url><urlElement value="file://`+dst+`"/></url></fileOutput></fileOutputArray></fileStageOut>
<fileCleanUp><pathArray><path><stringElement value="`+dir+`/in.txt"/></path></pathArray></fileCleanUp>`))
	st := h.waitEnd(ids[0])
	if st.Status != events.StatusSucceeded {
		t.Fatalf("a job in an absolute <directory>: %s (%s)", st.Status, st.Reason)
	}
	if out, err := os.ReadFile(dst); string(out) != "absolute\n" {
		t.Errorf("staged out %q (%v)", out, err)
	}
	if out, err := os.ReadFile(filepath.Join(dir, "STDOUT")); err != nil || strings.TrimSpace(string(out)) != dir {
		t.Errorf("STDOUT in %s: %q (%v); want the program's directory", dir, out, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "in.txt")); !os.IsNotExist(err) {
		t.Errorf("the absolute cleanup path is still there (%v)", err)
	}
}

// jrdlInDirectory is a JRDL job running in the relative directory "run" that reads a
// staged input, writes a result that is staged out, prints to its stdout (copied to the
// spec's relative STDOUT, a file in its directory, and to {JOBID}.out, a name only the
// target fills) and has its input cleaned up.
func jrdlInDirectory(src, dst string) string {
	return jrdlJob(`<stringElement value="cat in.txt &gt; copy.txt; echo printed; pwd"/>`, `
<directory><path><stringElement value="run"/></path></directory>
<stdout><pathArray><path><stringElement value="STDOUT"/></path><path><substitutionRef name="JOBID"/><stringElement value=".out"/></path></pathArray></stdout>
<fileStageIn><fileInputArray><fileInput><url><urlElement value="file://`+src+`"/></url><path><stringElement value="in.txt"/></path></fileInput></fileInputArray></fileStageIn>
<fileStageOut><fileOutputArray><fileOutput><path><stringElement value="copy.txt"/></path><url><urlElement value="file://`+dst+`"/></url></fileOutput></fileOutputArray></fileStageOut>
<fileCleanUp><pathArray><path><stringElement value="in.txt"/></path></pathArray></fileCleanUp>`)
}

// checkJRDLDirectory runs jrdlInDirectory through the whole gateway on the harness's one
// cluster, whose stager opens root: the staged input is where the program looks, the
// result of a job that exited 0 is staged out, STDOUT lands in the job's directory and
// cleanup removes the input from there; a reserved name in a stdout destination is
// filled with the target's value. The e2e suite runs it on real SSH and Slurm.
func checkJRDLDirectory(t *testing.T, h *harness, root string) {
	t.Helper()
	src, dst := filepath.Join(root, "in.txt"), filepath.Join(root, "out-"+strconv.FormatInt(time.Now().UnixNano(), 36))
	if err := os.WriteFile(src, []byte("staged\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ids := h.submitJRDL(jrdlInDirectory(src, dst))
	st := h.waitEnd(ids[0])
	if st.Status != events.StatusSucceeded {
		t.Fatalf("a job with a <directory>: %s (%s)", st.Status, st.Reason)
	}
	run := filepath.Join(st.Incarnation.WorkDir, "run")
	if out, err := os.ReadFile(dst); string(out) != "staged\n" {
		t.Errorf("staged out %q (%v); want the input the program read in its directory", out, err)
	}
	if out, err := os.ReadFile(filepath.Join(run, "STDOUT")); err != nil || !strings.HasPrefix(string(out), "printed\n") || !strings.HasSuffix(strings.TrimSpace(string(out)), "/run") {
		t.Errorf("STDOUT in the job's directory: %q (%v)", out, err)
	}
	if out, err := os.ReadFile(filepath.Join(run, ids[0]+".out")); err != nil || !strings.HasPrefix(string(out), "printed\n") {
		t.Errorf("stdout to {JOBID}.out in the job's directory: %q (%v)", out, err)
	}
	if _, err := os.Stat(filepath.Join(run, "in.txt")); !os.IsNotExist(err) {
		t.Errorf("cleanup left in.txt in the job's directory (%v)", err)
	}
	if _, err := os.Stat(filepath.Join(run, "copy.txt")); err != nil {
		t.Errorf("cleanup removed what it was not asked to: %v", err)
	}
}

// TestJRDLDirectoryOnFork: <directory>, staging, STDOUT and cleanup agree on a fork
// cluster through the whole gateway.
func TestJRDLDirectoryOnFork(t *testing.T) {
	root, target := t.TempDir(), t.TempDir()
	h := newHarnessWith(t, withRoots(t, cluster.Default(), root, target))
	checkJRDLDirectory(t, h, root)
	checkJRDLAbsoluteDirectory(t, h, root, target)
}
