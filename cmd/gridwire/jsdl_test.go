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

// A JSDL job (POSIX application, a staged-in input, a staged-out result, environment
// and standard output named by the document) goes through the whole pipeline on the fork
// cluster: ingest detects JSDL by its root element, and everything downstream sees the
// canonical job only.
func TestJSDLJobRunsEndToEnd(t *testing.T) {
	root := t.TempDir()
	cfg, err := cluster.Parse("jsdl.yaml", []byte(fmt.Sprintf(`clusters:
  - {name: local, kind: fork, profile: fork, lrms: Fork}
stager:
  file_roots: [{path: %q, access: read-write}]
`, root)))
	if err != nil {
		t.Fatal(err)
	}
	h := newHarnessWith(t, cfg)
	src := filepath.Join(root, "words.txt")
	if err := os.WriteFile(src, []byte("grid jobs\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(root, "results")
	if err := os.Mkdir(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	doc := `<?xml version="1.0" encoding="UTF-8"?>
<jsdl:JobDefinition xmlns:jsdl="http://schemas.ggf.org/jsdl/2005/11/jsdl"
    xmlns:jsdl-posix="http://schemas.ggf.org/jsdl/2005/11/jsdl-posix">
  <jsdl:JobDescription>
    <jsdl:JobIdentification><jsdl:JobName>upper</jsdl:JobName></jsdl:JobIdentification>
    <jsdl:Application>
      <jsdl-posix:POSIXApplication>
        <jsdl-posix:Executable>/bin/sh</jsdl-posix:Executable>
        <jsdl-posix:Argument>-c</jsdl-posix:Argument>
        <jsdl-posix:Argument>tr a-z A-Z &lt; in.txt &gt; out.txt; echo "$GREETING"</jsdl-posix:Argument>
        <jsdl-posix:Output>log.txt</jsdl-posix:Output>
        <jsdl-posix:Environment name="GREETING">hello from jsdl</jsdl-posix:Environment>
        <jsdl-posix:WallTimeLimit>600</jsdl-posix:WallTimeLimit>
      </jsdl-posix:POSIXApplication>
    </jsdl:Application>
    <jsdl:DataStaging>
      <jsdl:FileName>in.txt</jsdl:FileName>
      <jsdl:CreationFlag>overwrite</jsdl:CreationFlag>
      <jsdl:DeleteOnTermination>true</jsdl:DeleteOnTermination>
      <jsdl:Source><jsdl:URI>file://` + src + `</jsdl:URI></jsdl:Source>
    </jsdl:DataStaging>
    <jsdl:DataStaging>
      <jsdl:FileName>log.txt</jsdl:FileName>
      <jsdl:Target><jsdl:URI>file://` + dst + `/log.txt</jsdl:URI></jsdl:Target>
    </jsdl:DataStaging>
    <jsdl:DataStaging>
      <jsdl:FileName>out.txt</jsdl:FileName>
      <jsdl:Target><jsdl:URI>file://` + dst + `/out.txt</jsdl:URI></jsdl:Target>
    </jsdl:DataStaging>
  </jsdl:JobDescription>
</jsdl:JobDefinition>
`
	acc, err := h.submit.Submit(context.Background(), ingest.Submission{File: "upper.jsdl", Data: []byte(doc), Submitter: "test"})
	if err != nil {
		t.Fatal(err)
	}
	id := acc.Jobs[0]
	st := h.waitEnd(id)
	if st.Status != events.StatusSucceeded {
		t.Fatalf("state %s reason %q, want SUCCEEDED", st.Status, st.Reason)
	}
	out, err := os.ReadFile(filepath.Join(dst, "out.txt"))
	if err != nil || string(out) != "GRID JOBS\n" {
		t.Fatalf("staged-out result %q (%v), want the input upper-cased", out, err)
	}
	log, err := os.ReadFile(filepath.Join(dst, "log.txt"))
	if err != nil || !strings.Contains(string(log), "hello from jsdl") {
		t.Fatalf("standard output staged to the Output file's Target: %q (%v)", log, err)
	}
	if _, err := os.Stat(filepath.Join(h.workDir(id), "in.txt")); !os.IsNotExist(err) {
		t.Fatalf("in.txt (DeleteOnTermination) is still in the job's directory: %v", err)
	}
	if _, err := os.Stat(filepath.Join(h.workDir(id), "out.txt")); err != nil {
		t.Fatalf("out.txt (not marked for deletion) is gone: %v", err)
	}
	var sub events.Job
	for _, e := range h.history(id) {
		if e.Name == events.Submitted {
			if err := e.Payload(&sub); err != nil {
				t.Fatal(err)
			}
		}
	}
	if sub.Original.Format != ingest.FormatJSDL {
		t.Fatalf("submitted format %q, want jsdl", sub.Original.Format)
	}
	h.assertCleanHistory(id)
}

// JSDL's POSIX limits bound the program through the whole pipeline: a program that
// writes past its FileSizeLimit is stopped by the kernel (SIGXFSZ) with the file at the
// limit, and one that spins past its CPUTimeLimit is ended (SIGKILL on Linux, whose
// soft and hard limits are equal; SIGXCPU where a kernel sends that first). Both end FAILED
// with the signal's exit code, and a job within its limits succeeds.
func TestJSDLLimitsBoundTheProgram(t *testing.T) { checkJSDLLimits(t, newHarness(t)) }

// checkJSDLLimits runs TestJSDLLimitsBoundTheProgram's jobs on h's one cluster (the
// end-to-end suite runs them over SSH and on Slurm).
func checkJSDLLimits(t *testing.T, h *harness) {
	job := func(script, limits string) string {
		doc := `<jsdl:JobDefinition xmlns:jsdl="http://schemas.ggf.org/jsdl/2005/11/jsdl"
    xmlns:jsdl-posix="http://schemas.ggf.org/jsdl/2005/11/jsdl-posix">
  <jsdl:JobDescription><jsdl:Application><jsdl-posix:POSIXApplication>
    <jsdl-posix:Executable>/bin/sh</jsdl-posix:Executable>
    <jsdl-posix:Argument>-c</jsdl-posix:Argument>
    <jsdl-posix:Argument>` + script + `</jsdl-posix:Argument>` + limits + `
  </jsdl-posix:POSIXApplication></jsdl:Application></jsdl:JobDescription>
</jsdl:JobDefinition>`
		acc, err := h.submit.Submit(context.Background(), ingest.Submission{File: "limits.jsdl", Data: []byte(doc), Submitter: "test"})
		if err != nil {
			t.Fatal(err)
		}
		return acc.Jobs[0]
	}
	write := job("head -c 10000 /dev/zero &gt;big", "<jsdl-posix:FileSizeLimit>4096</jsdl-posix:FileSizeLimit>")
	spin := job("while :; do :; done", "<jsdl-posix:CPUTimeLimit>1</jsdl-posix:CPUTimeLimit>")
	within := job("head -c 4096 /dev/zero &gt;big", "<jsdl-posix:FileSizeLimit>4096</jsdl-posix:FileSizeLimit><jsdl-posix:CPUTimeLimit>60</jsdl-posix:CPUTimeLimit>")

	st := h.waitEnd(write)
	if st.Status != events.StatusFailed || st.ExitCode == nil || *st.ExitCode != 128+25 {
		t.Errorf("writing past FileSizeLimit: %s, exit %v (%s); want FAILED with 153 (SIGXFSZ)", st.Status, st.ExitCode, st.Reason)
	}
	if fi, err := os.Stat(filepath.Join(st.Incarnation.WorkDir, "big")); err != nil || fi.Size() != 4096 {
		t.Errorf("the file written past the limit: %v %v; want 4096 bytes", fi, err)
	}
	st = h.waitEnd(spin)
	if st.Status != events.StatusFailed || st.ExitCode == nil || *st.ExitCode != 128+24 && *st.ExitCode != 128+9 {
		t.Errorf("spinning past CPUTimeLimit: %s, exit %v (%s); want FAILED by SIGXCPU or SIGKILL", st.Status, st.ExitCode, st.Reason)
	}
	if st := h.waitEnd(within); st.Status != events.StatusSucceeded {
		t.Errorf("a job within its limits: %s (%s)", st.Status, st.Reason)
	}
}
