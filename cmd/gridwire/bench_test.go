package main

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
)

// One small run of `gridwire bench` measures every figure its table prints, and the
// scale mode builds a log of whole histories the read side then serves.
func TestBenchMeasuresEveryFigure(t *testing.T) {
	ctx := context.Background()
	data := t.TempDir()
	status, out, errOut := cli(ctx, "bench", "--json", "--allow-root-jobs", "--data", data, "--raw-for", "200ms",
		"--jobs", "20", "--submit-jobs", "300", "--latency-jobs", "5", "--read-jobs", "10")
	if status != 0 {
		t.Fatalf("exit %d: %s", status, errOut)
	}
	var r benchResult
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	figures := map[string]float64{"raw spawn": r.RawSpawnPerSec, "raw job": r.RawJobPerSec, "pipeline": r.PipelinePerSec,
		"raw job before": r.RawJobBeforePerSec, "raw job after": r.RawJobAfterPerSec,
		"pipeline ratio": r.PipelineRatio, "cpu per job": r.CPUPerJobMicros, "latency": r.LatencyP50Millis,
		"raw job latency": r.RawJobP50Millis, "submit": r.SubmitPerSec, "bulk submit": r.BulkSubmitPerSec,
		"raw appends": r.RawAppendPerSec, "submit cpu": r.SubmitCPUMicros, "bulk submit cpu": r.BulkCPUMicros,
		"raw appends cpu": r.RawAppendCPUMicros, "bare appends": r.BareAppendPerSec, "bare appends cpu": r.BareAppendCPUMicros, "replay": r.ReplayPerSec, "raw consume": r.RawConsumePerSec,
		"job read": r.Reads.JobP50, "events read": r.Reads.EventsP50, "direct get": r.Reads.GetP50, "store walk": r.Reads.WalkP50, "rss": r.RSSMiB,
		"events stored per job": r.Ops.Stored, "deliveries per job": r.Ops.Delivered}
	for name, v := range figures {
		if v <= 0 {
			t.Errorf("%s: %v, not measured", name, v)
		}
	}
	// The idle job's path: every event of a fork job's life, in the log's order, each
	// seen after the one before it.
	var hops []string
	for _, h := range r.LatencyHops {
		hops = append(hops, string(h.Event))
		if h.P50Millis <= 0 || h.P99Millis < h.P50Millis {
			t.Errorf("hop %s: p50 %v, p99 %v ms", h.Event, h.P50Millis, h.P99Millis)
		}
	}
	if got := strings.Join(hops, " "); got != "submitted incarnated queued started exited staged_out succeeded" {
		t.Errorf("the idle job's hops: %q", got)
	}
	// The raw jobs' directories are kept through the pipeline and removed at the end.
	if left, _ := filepath.Glob(filepath.Join(data, "pipeline", "jobs", "raw*")); len(left) > 0 {
		t.Errorf("the raw jobs' directories were left: %v", left)
	}
	if r.LogJobs != 25 || r.ReplayEvents < r.LogEvents { // a late event may follow the catch-up
		t.Errorf("log of %d jobs, %d events, replayed %d", r.LogJobs, r.LogEvents, r.ReplayEvents)
	}
	// The target rows were not asked for: each is skipped, naming the flag that measures it.
	if len(r.Skipped) != 2 || !strings.Contains(r.Skipped[0], "--slurm ") || !strings.Contains(r.Skipped[1], "--ssh HOST") ||
		r.Slurm != nil || r.SSH != nil {
		t.Errorf("skipped %q; slurm %v, ssh %v", r.Skipped, r.Slurm, r.SSH)
	}

	// A log of 300 jobs has a subject index of a few hundred KiB: sample the heap finely
	// enough to see it.
	defer func(rate int) { runtime.MemProfileRate = rate }(runtime.MemProfileRate)
	runtime.MemProfileRate = 4096
	scaleData := t.TempDir()
	status, out, errOut = cli(ctx, "bench", "--json", "--allow-root-jobs", "--data", scaleData, "--scale", "300", "--read-jobs", "10")
	if status != 0 {
		t.Fatalf("--scale: exit %d: %s", status, errOut)
	}
	r = benchResult{}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	if r.LogJobs != 300 || r.LogEvents < 300*6 || r.ReplayEvents != r.LogEvents || r.Reads.JobP50 <= 0 || r.RSSMiB <= 0 {
		t.Errorf("--scale 300: %+v", r)
	}
	// The heap is split between the server (which holds the subject index of the log)
	// and gridwire (which holds the job table), and the reads' CPU is measured.
	if s := r.Scale; s == nil || s.ReadCPUMicros <= 0 || s.CaughtUp.SubjectTreesMiB <= 0 ||
		s.CaughtUp.ServerMiB < s.CaughtUp.SubjectTreesMiB || s.CaughtUp.GridwireMiB <= 0 || s.AfterReads.RSSMiB <= 0 {
		t.Errorf("--scale 300: scale rows %+v", s)
	}

	// The log is reused, and --no-replay measures the reads and memory alone.
	status, out, errOut = cli(ctx, "bench", "--json", "--allow-root-jobs", "--data", scaleData, "--scale", "300", "--read-jobs", "10", "--no-replay")
	if status != 0 {
		t.Fatalf("--scale --no-replay: exit %d: %s", status, errOut)
	}
	r = benchResult{}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(errOut, "reusing the log") || r.FillSeconds != 0 || r.ReplayPerSec != 0 || r.ReplayEvents != 0 ||
		r.Reads.EventsP50 <= 0 || r.RSSMiB <= 0 {
		t.Errorf("--scale 300 --no-replay on the same data: %+v (%s)", r, errOut)
	}
}

// Target flags that cannot measure anything are refused before anything runs, naming
// the flag.
func TestBenchRefusesTargetFlagsItCannotUse(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--targets-only"}, "--targets-only: name a target"},
		{[]string{"--ssh", "127.0.0.1:2222"}, "--ssh 127.0.0.1:2222: --ssh-known-hosts is required"},
		{[]string{"--ssh", "-oProxyCommand=x", "--ssh-known-hosts", "kh"}, `--ssh "-oProxyCommand=x": want HOST or HOST:PORT`},
		{[]string{"--ssh", "gw@host", "--ssh-known-hosts", "kh"}, `--ssh "gw@host": want HOST or HOST:PORT`},
		{[]string{"--ssh", "host:ssh", "--ssh-known-hosts", "kh"}, `--ssh "host:ssh": port "ssh" is not a port number`},
		{[]string{"--ssh", "host", "--ssh-known-hosts", "kh", "--ssh-jobs", "0"}, "--ssh-jobs 0: must be at least 1"},
		{[]string{"--slurm", "--slurm-jobs", "0"}, "--slurm-jobs 0, --slurm-pairs 1: both must be at least 1"},
	} {
		data := t.TempDir()
		status, _, errOut := cli(context.Background(), append([]string{"bench", "--data", data}, tc.args...)...)
		if status == 0 || !strings.Contains(errOut, tc.want) {
			t.Errorf("bench %v: exit %d, %q; want an error with %q", tc.args, status, errOut, tc.want)
		}
	}
}

// A run whose jobs would run as root is refused before it starts unless
// --allow-root-jobs consents; a run that starts no job on this host needs no consent.
func TestBenchAsksConsentToRunJobsAsRoot(t *testing.T) {
	for _, tc := range []struct {
		name   string
		o      benchOpts
		euid   int
		refuse bool
	}{
		{"pipeline as root", benchOpts{}, 0, true},
		{"pipeline as root, consenting", benchOpts{allowRoot: true}, 0, false},
		{"pipeline as a user", benchOpts{}, 1000, false},
		{"scale as root", benchOpts{scale: 1000}, 0, true},
		{"submit rows alone", benchOpts{submitOnly: true}, 0, false},
		{"slurm row", benchOpts{targets: targetOpts{only: true, slurm: true}}, 0, true},
		{"ssh row alone", benchOpts{targets: targetOpts{only: true, ssh: "host"}}, 0, false},
	} {
		err := tc.o.rootCheck(tc.euid)
		if (err != nil) != tc.refuse || err != nil && !strings.Contains(err.Error(), "--allow-root-jobs") {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
	if os.Geteuid() == 0 {
		status, _, errOut := cli(context.Background(), "bench", "--data", t.TempDir(), "--jobs", "1")
		if status != exitUsage || !strings.Contains(errOut, "--allow-root-jobs") {
			t.Errorf("bench as root: exit %d, %q", status, errOut)
		}
	}
}

// A service that stops during a run ends the run's wait at once, and the error says
// what stopped it rather than that the jobs took too long.
func TestBenchWaitEndsWhenAServiceStops(t *testing.T) {
	g, gctx := errgroup.WithContext(context.Background())
	b := &benchServices{ctx: gctx, g: g, cancel: func() {}}
	g.Go(func() error { return errors.New("executor: refusing to run a fork cluster's jobs as root") })
	err := b.why(newEndWatch().waitCount(b.ctx, 1, time.Hour))
	if err == nil || !strings.Contains(err.Error(), "the services stopped: executor: refusing") {
		t.Fatalf("wait ended with %v", err)
	}
	if err := b.why(nil); err != nil {
		t.Fatalf("why(nil) = %v", err)
	}
}
