//go:build unix

package ingest

import (
	"context"
	"os"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// cpuTime is the CPU time this process has used (user and system, every thread, so
// the garbage collector's work counts). The machine these run on is shared, so wall time
// per operation overstates cost; docs per CPU-second is the per-core throughput.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// smallV3 is a typical small submission: an executable, arguments, environment, one
// input, one output and a few requirements (about 400 bytes).
var smallV3 = []byte(`{
  "version": 3,
  "description": "small job",
  "executable": "/usr/bin/simulate",
  "arguments": ["--steps", "1000", "--out", "result.dat"],
  "environment": {"omp_num_threads": "4", "run": "{taskid}"},
  "count": 4,
  "default_storage_base": "gsiftp://storage.example.org/users/alice/",
  "input_files": {"input.dat": "inputs/input.dat"},
  "output_files": {"result.dat": "results/{taskid}/result.dat"},
  "stdout": "results/{taskid}/stdout",
  "requirements": {"lrms": "PBS", "queue": "short", "ram_size": 2048, "software": "gcc >= 9, openmpi"}
}`)

var smallV3YAML = []byte(`version: 3
description: small job
executable: /usr/bin/simulate
arguments: ["--steps", "1000", "--out", "result.dat"]
environment: {omp_num_threads: "4", run: "{taskid}"}
count: 4
default_storage_base: gsiftp://storage.example.org/users/alice/
input_files: {input.dat: inputs/input.dat}
output_files: {result.dat: "results/{taskid}/result.dat"}
stdout: "results/{taskid}/stdout"
requirements: {lrms: PBS, queue: short, ram_size: 2048, software: "gcc >= 9, openmpi"}
`)

func benchParse(b *testing.B, data []byte, opts ParseOptions) {
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	start := cpuTime()
	for b.Loop() {
		if _, err := Parse("bench", data, opts); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "docs/s")
	b.ReportMetric(float64(b.N)/(cpuTime()-start).Seconds(), "docs/cpu-s")
}

func BenchmarkParseV3JSONSmall(b *testing.B) {
	benchParse(b, smallV3, ParseOptions{Format: FormatV3JSON})
}

func BenchmarkParseV3JSONSmallDetected(b *testing.B) {
	benchParse(b, smallV3, ParseOptions{ContentType: "application/json"})
}

func BenchmarkParseV3YAMLSmall(b *testing.B) {
	benchParse(b, smallV3YAML, ParseOptions{Format: FormatV3YAML})
}

func BenchmarkParseJRDLAllAttributes(b *testing.B) {
	benchParse(b, mustRead(b, "testdata/jrdl/all_attributes.xml"), ParseOptions{Format: FormatJRDL})
}

func BenchmarkParseDDSSpecExample(b *testing.B) {
	benchParse(b, mustRead(b, "testdata/dds/spec_example.xml"), ParseOptions{Format: FormatDDS})
}

// topology100k expands to 100,000 instances: 25,000 times a task and a collection of
// three tasks.
var topology100k = []byte(`<topology name="big">
  <var name="n" value="25000"/>
  <property name="port"/>
  <declrequirement name="wn" type="wnname" value="wn[0-9]+"/>
  <decltrigger name="restart" condition="TaskCrashed" action="RestartTask" arg="3"/>
  <decltask name="sampler">
    <exe reachable="false">/opt/bin/sampler --id %taskIndex% --collection %collectionIndex%</exe>
    <properties><name access="write">port</name></properties>
    <triggers><name>restart</name></triggers>
  </decltask>
  <decltask name="processor">
    <exe>/opt/bin/processor --id %taskIndex%</exe>
    <properties><name access="read">port</name></properties>
  </decltask>
  <declcollection name="chain">
    <requirements><name>wn</name></requirements>
    <tasks><name n="2">processor</name><name>sampler</name></tasks>
  </declcollection>
  <main name="main">
    <group name="workers" n="${n}">
      <task>sampler</task>
      <collection>chain</collection>
    </group>
  </main>
</topology>`)

func BenchmarkExpandDDS100k(b *testing.B) {
	b.ReportAllocs()
	start := cpuTime()
	for b.Loop() {
		jobs, err := Parse("big.xml", topology100k, ParseOptions{Format: FormatDDS})
		if err != nil {
			b.Fatal(err)
		}
		if len(jobs) != 100_001 {
			b.Fatalf("%d jobs", len(jobs))
		}
	}
	b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "s/topology")
	b.ReportMetric((cpuTime()-start).Seconds()/float64(b.N), "cpu-s/topology")
}

// BenchmarkSubmitDDSMillion expands a topology of 1,000,000 instances (topology100k with
// 250,000 groups) and submits it into a real embedded JetStream: every submitted event
// appended and acknowledged (the streamed path). Peak memory is the process's, the
// embedded server's store included: run it alone under /usr/bin/time -v.
func BenchmarkSubmitDDSMillion(b *testing.B) { benchSubmitDDS(b, benchService(b, false)) }

// BenchmarkSubmitDDSMillionSigned is BenchmarkSubmitDDSMillion signing as a deployed
// ingest does (one signature a batch of events).
func BenchmarkSubmitDDSMillionSigned(b *testing.B) { benchSubmitDDS(b, benchService(b, true)) }

func benchSubmitDDS(b *testing.B, s *Service) {
	data := bigTopology(250_000 / benchScale())
	start := cpuTime()
	for b.Loop() {
		acc, err := s.Submit(context.Background(), Submission{File: "big.xml", Data: data, Submitter: "bench"})
		if err != nil || len(acc.Jobs) != 1_000_000/benchScale()+1 {
			b.Fatalf("%d jobs: %v", len(acc.Jobs), err)
		}
	}
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "s/topology")
	b.ReportMetric((cpuTime()-start).Seconds()/float64(b.N), "cpu-s/topology")
	b.ReportMetric(float64(m.HeapSys>>20), "MiB-heap-sys")
}

// benchScale divides BenchmarkSubmitDDSMillion's topology (GRIDWIRE_BENCH_SCALE, for a
// profile of a smaller run); 1 by default.
func benchScale() int {
	if n, err := strconv.Atoi(os.Getenv("GRIDWIRE_BENCH_SCALE")); err == nil && n > 0 {
		return n
	}
	return 1
}
