package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRenderVerb(t *testing.T) {
	dir := t.TempDir()
	job := filepath.Join(dir, "job.json")
	os.WriteFile(job, []byte(`{"version":3,"executable":"/bin/echo","arguments":["$(id)"],"requirements":{"queue":"debug"}}`), 0o600)
	cfg := filepath.Join(dir, "c.yaml")
	os.WriteFile(cfg, []byte("clusters:\n- name: hpc\n  kind: ssh\n  hosts: [login1]\n  known_hosts: /dev/null\n  profile: slurm\n  lrms: Slurm\n  queues: [batch, debug]\n  work_root: /scratch\n"), 0o600)
	var out, errOut bytes.Buffer
	getenv := func(string) string { return "" }
	if err := run(context.Background(), []string{"render", "--config", cfg, "--script", "START,JOB", job}, getenv, &out, &errOut); err != nil {
		t.Fatalf("%v: %s", err, errOut.String())
	}
	for _, want := range []string{"cluster hpc, queue \"debug\", lrms Slurm, profile slurm", "exec sbatch \"$@\"", "--partition=\"$queue\"", "exec /bin/echo '$(id)'"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	os.WriteFile(job, []byte(`{"version":3,"executable":"x","requirements":{"queue":"gpu"}}`), 0o600)
	err := run(context.Background(), []string{"render", "--config", cfg, job}, getenv, &out, &errOut)
	var ec exitCode
	if !errors.As(err, &ec) || !strings.Contains(out.String(), "hpc: requirements.queue (line 1): the job asks for queue gpu, the cluster has batch, debug") {
		t.Errorf("no match: %v\n%s", err, out.String())
	}
}

func TestProfilesCheckVerb(t *testing.T) {
	var out, errOut bytes.Buffer
	getenv := func(string) string { return "" }
	if err := run(context.Background(), []string{"profiles", "check", filepath.Join("..", "..", "deploy", "profiles")}, getenv, &out, &errOut); err != nil {
		t.Fatalf("%v: %s", err, errOut.String())
	}
	if !strings.Contains(out.String(), "4 profiles OK [fork linux pbs slurm]") {
		t.Errorf("output %q", out.String())
	}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "x.xml"), []byte("<Profile name=\"x\" extends=\"y\">\n<Bogus/>\n</Profile>\n"), 0o600)
	errOut.Reset()
	err := run(context.Background(), []string{"profiles", "check", dir}, getenv, &out, &errOut)
	var ec exitCode
	if !errors.As(err, &ec) || !strings.Contains(errOut.String(), dir+"/x.xml:2:1: Bogus: unknown element in Profile") ||
		!strings.Contains(errOut.String(), dir+`/x.xml:1:1: Profile@extends: profile "x" extends "y"`) {
		t.Errorf("got %v: %s", err, errOut.String())
	}
}

// JSDL's IndividualCPUSpeed and IndividualVirtualMemory choose the cluster: the job goes
// to the one whose system info has the clock rate and the virtual memory, and is refused,
// naming the element and both numbers, where none has.
func TestRenderJSDLSpeedAndVirtualMemoryChooseTheCluster(t *testing.T) {
	dir := t.TempDir()
	job := filepath.Join(dir, "job.jsdl")
	os.WriteFile(job, []byte(`<jsdl:JobDefinition xmlns:jsdl="http://schemas.ggf.org/jsdl/2005/11/jsdl"
    xmlns:jsdl-posix="http://schemas.ggf.org/jsdl/2005/11/jsdl-posix">
  <jsdl:JobDescription>
    <jsdl:Application><jsdl-posix:POSIXApplication><jsdl-posix:Executable>/bin/true</jsdl-posix:Executable></jsdl-posix:POSIXApplication></jsdl:Application>
    <jsdl:Resources>
      <jsdl:IndividualCPUSpeed><jsdl:LowerBoundedRange>3.0e9</jsdl:LowerBoundedRange></jsdl:IndividualCPUSpeed>
      <jsdl:IndividualVirtualMemory><jsdl:LowerBoundedRange>17179869184</jsdl:LowerBoundedRange></jsdl:IndividualVirtualMemory>
    </jsdl:Resources>
  </jsdl:JobDescription>
</jsdl:JobDefinition>
`), 0o600)
	cluster := func(name string, hz, vmem int) string {
		return fmt.Sprintf("- {name: %s, kind: fork, profile: fork, lrms: Fork, info: {cpu_hz: %d, virtual_size: %d}}\n", name, hz, vmem)
	}
	cfg := filepath.Join(dir, "c.yaml")
	os.WriteFile(cfg, []byte("clusters:\n"+cluster("slow", 2000000000, 65536)+cluster("small", 3500000000, 8192)+cluster("fit", 3500000000, 16384)), 0o600)
	var out, errOut bytes.Buffer
	getenv := func(string) string { return "" }
	if err := run(context.Background(), []string{"render", "--config", cfg, job}, getenv, &out, &errOut); err != nil {
		t.Fatalf("%v: %s%s", err, out.String(), errOut.String())
	}
	if !strings.Contains(out.String(), "cluster fit,") {
		t.Errorf("want the cluster fit:\n%s", out.String())
	}
	os.WriteFile(cfg, []byte("clusters:\n"+cluster("slow", 2000000000, 65536)+cluster("small", 3500000000, 8192)), 0o600)
	out.Reset()
	err := run(context.Background(), []string{"render", "--config", cfg, job}, getenv, &out, &errOut)
	var ec exitCode
	if !errors.As(err, &ec) || !strings.Contains(out.String(), "IndividualCPUSpeed") || !strings.Contains(out.String(), "IndividualVirtualMemory") {
		t.Errorf("no cluster fits: %v\n%s", err, out.String())
	}
}
