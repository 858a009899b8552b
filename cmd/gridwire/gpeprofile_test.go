package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/pkg/cluster"
	"github.com/gridwire/gridwire/services/ingest"
)

// gpeProfileDir is a profile directory with the shipped profiles and the example that
// uses every part of the GPE OS profile spec (examples/profiles/gpe-full.xml).
func gpeProfileDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	files, _ := filepath.Glob(filepath.Join("..", "..", "deploy", "profiles", "*.xml"))
	files = append(files, filepath.Join("..", "..", "examples", "profiles", "gpe-full.xml"))
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(f)), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// The profile that uses every part of the spec runs jobs end to end on a local fork
// cluster: application, variation and fields chosen by a v3 job (x-gpe) and a JSDL job
// (ApplicationName, gpe:Field), JSDL Output and Error without staging, two-level
// replacements on run-time values, a storage, the GPE epilogue's .gpe_exit_status,
// and HOLD, RESUME and ABORT as static scripts.
func TestGPEProfilePartsEndToEnd(t *testing.T) {
	scratch := t.TempDir()
	cfg, err := cluster.Parse("gpe.yaml", []byte(fmt.Sprintf(`profile_dir: %q
clusters:
  - name: local
    kind: fork
    profile: gpe-full
    lrms: Fork
    fields: {SCRATCH_BASE: %q}
    info: {os_name: Linux}
`, gpeProfileDir(t), scratch)))
	if err != nil {
		t.Fatal(err)
	}
	h := newHarnessWith(t, cfg)
	checkGPEProfileParts(t, h, scratch, "Linux")
}

// checkGPEProfileParts runs the gpe-full profile's jobs on h's one cluster, whose
// SCRATCH_BASE is scratch and whose info.os_name is osName.
func checkGPEProfileParts(t *testing.T, h *harness, scratch, osName string) {
	t.Helper()
	read := func(st events.State, name string) string {
		t.Helper()
		data, err := os.ReadFile(filepath.Join(st.Incarnation.WorkDir, name))
		if err != nil {
			t.Fatalf("job %s: %v", st.JobID, err)
		}
		return string(data)
	}
	succeeded := func(id string) events.State {
		t.Helper()
		st := h.waitEnd(id)
		if st.Status != events.StatusSucceeded {
			t.Fatalf("job %s: state %s (%s), want SUCCEEDED", id, st.Status, st.Reason)
		}
		h.assertCleanHistory(id)
		return st
	}

	// v3: the application's debug variation, a tagged and a limited field.
	id := h.submitJSON(map[string]any{"version": 3, "executable": "/bin/sh",
		"arguments": []string{"-c", `printf '%s\n' "$GPE_STORAGE_SCRATCH" > storage.txt`},
		"x-gpe": map[string]any{"application": "report", "application_version": "1.0", "variation": "debug",
			"fields": map[string]string{"LEVEL": "high", "SCALE": "2.5"}}})
	st := succeeded(id)
	if got := read(st, "report.txt"); got != "mode=debug level=9 scale=2.5 site=gridwire\n" {
		t.Errorf("v3 report %q", got)
	}
	if got := read(st, events.GPEExitFile); got != "0\n" {
		t.Errorf(".gpe_exit_status %q", got)
	}
	storage := strings.TrimSpace(read(st, "storage.txt"))
	if !strings.HasPrefix(storage, scratch+"/") || len(storage) <= len(scratch)+1 {
		t.Errorf("GPE_STORAGE_SCRATCH %q, want a directory under %s", storage, scratch)
	}
	if fi, err := os.Stat(storage); err != nil || !fi.IsDir() {
		t.Errorf("the prologue did not make the scratch directory %s: %v", storage, err)
	}
	want := fmt.Sprintf("uspace root: %s\njob: %s…\nscratch: %s\nos: %s\n", filepath.Dir(st.Incarnation.WorkDir), id[:2], storage, osName)
	if got := read(st, "gpe-prologue.txt"); got != want {
		t.Errorf("prologue wrote %q, want %q", got, want)
	}

	// JSDL: the application by name, a field by tag, Output and Error without staging.
	doc := `<jsdl:JobDefinition xmlns:jsdl="http://schemas.ggf.org/jsdl/2005/11/jsdl"
    xmlns:jsdl-posix="http://schemas.ggf.org/jsdl/2005/11/jsdl-posix" xmlns:gpe="urn:gridwire:jsdl-gpe">
  <jsdl:JobDescription>
    <jsdl:Application>
      <jsdl:ApplicationName>report</jsdl:ApplicationName>
      <gpe:Field name="LEVEL">medium</gpe:Field>
      <jsdl-posix:POSIXApplication>
        <jsdl-posix:Executable>/bin/sh</jsdl-posix:Executable>
        <jsdl-posix:Argument>-c</jsdl-posix:Argument>
        <jsdl-posix:Argument>echo to out; echo to err >&amp;2</jsdl-posix:Argument>
        <jsdl-posix:Output>out.txt</jsdl-posix:Output>
        <jsdl-posix:Error>logs/err.txt</jsdl-posix:Error>
      </jsdl-posix:POSIXApplication>
    </jsdl:Application>
  </jsdl:JobDescription>
</jsdl:JobDefinition>`
	acc, err := h.submit.Submit(context.Background(), ingest.Submission{File: "report.jsdl", Data: []byte(doc), Submitter: "test"})
	if err != nil {
		t.Fatal(err)
	}
	st = succeeded(acc.Jobs[0])
	for name, want := range map[string]string{"report.txt": "mode=normal level=5 scale=1 site=gridwire\n",
		"out.txt": "to out\n", "logs/err.txt": "to err\n"} {
		if got := read(st, name); got != want {
			t.Errorf("JSDL job's %s: %q, want %q", name, got, want)
		}
	}

	// A field outside its limits: no cluster can render the job, and the reason says why.
	id = h.submitJSON(map[string]any{"version": 3, "executable": "/bin/true",
		"x-gpe": map[string]any{"application": "report", "fields": map[string]string{"SCALE": "9"}}})
	if st = h.waitEnd(id); st.Status != events.StatusFailed || !strings.Contains(st.Reason, "SCALE") || !strings.Contains(st.Reason, "limits 0.5..4") {
		t.Errorf("SCALE 9: state %s (%s), want FAILED naming the field's limits", st.Status, st.Reason)
	}

	// HOLD, RESUME and ABORT are static scripts.
	gate := gated()
	gate["x-gpe"] = map[string]any{"application": "report"}
	id = h.submitJSON(gate)
	h.waitFor(id, "RUNNING", isRunning)
	h.ask(id, events.HoldRequested)
	h.waitFor(id, "HELD", func(s events.State) bool { return s.Status == events.StatusHeld })
	h.ask(id, events.ResumeRequested)
	h.waitFor(id, "RUNNING again", func(s events.State) bool { return s.Status == events.StatusRunning && s.HeldFrom == "" })
	h.ask(id, events.CancelRequested)
	if st = h.waitEnd(id); st.Status != events.StatusCancelled {
		t.Fatalf("state %s (%s), want CANCELLED", st.Status, st.Reason)
	}
	h.assertCleanHistory(id)
	for _, name := range []string{"gpe-signal", "gpe-abort"} {
		if m, _ := filepath.Glob(filepath.Join(filepath.Dir(st.Incarnation.WorkDir), ".gpe-bin", name+"-*")); len(m) != 1 {
			t.Errorf("static script %s installed as %v, want one file in BIN", name, m)
		}
	}
}
