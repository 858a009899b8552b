package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/pkg/cluster"
	"github.com/gridwire/gridwire/services/ingest"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"
)

type benchOpts struct {
	data       string
	jobs       int
	submitJobs int
	latJobs    int
	readJobs   int
	workers    int
	json       bool
	cpuProfile string
	workRoot   string
	scale      int
	settle     time.Duration
	noReplay   bool
	submitOnly bool
	allowRoot  bool
	memProfile string
	rawFor     time.Duration
	// natsServer (--nats-server, with --scale) is an official nats-server binary the
	// scale run starts on the log and connects to (natsURL), instead of embedding one.
	natsServer string
	natsURL    string
	targets    targetOpts
}

// rootCheck refuses, before anything starts, a run whose jobs would run as root
// without --allow-root-jobs (the executor would refuse them only once the run was under
// way): every mode but --submit-only runs jobs, on the fork cluster or through Slurm,
// except an ssh row alone, whose jobs run as the ssh login.
func (o *benchOpts) rootCheck(euid int) error {
	forkJobs := !o.submitOnly && (o.scale > 0 || !o.targets.only || o.targets.slurm)
	if euid != 0 || o.allowRoot || !forkJobs {
		return nil
	}
	return usageErrorf("bench runs /bin/true jobs on this host, and runs as root: pass --allow-root-jobs to let " +
		"them run as root (as serve --allow-root-jobs does), or run it as an unprivileged user")
}

func benchCmd(e *env) *cobra.Command {
	o := &benchOpts{}
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "measure every figure of the gateway's goals beside its yardstick, in one run",
		Long: "bench runs gridwire against its yardsticks on this machine and prints one row per figure:\n" +
			"the pipeline against the same fork job run without gridwire, gridwire's CPU per job against\n" +
			"the job's own, idle latency against one raw job, durable submit (one job a request, and bulk)\n" +
			"against JetStream's own pipelined conditional appends, replay against a raw read of the\n" +
			"same stream, job reads against one direct get, and the process's RSS. --scale N builds a log\n" +
			"of N whole job histories once (synthetic copies of a real job's) and measures the reads, the\n" +
			"replay and the RSS of the read side with N jobs in the log.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.targets.check(); err != nil {
				return err
			}
			if err := o.rootCheck(os.Geteuid()); err != nil {
				return err
			}
			if o.data == "" {
				d, err := os.MkdirTemp("", "gridwire-bench-")
				if err != nil {
					return err
				}
				defer os.RemoveAll(d)
				o.data = d
			}
			if o.cpuProfile != "" {
				pf, err := os.Create(o.cpuProfile)
				if err != nil {
					return err
				}
				defer pf.Close()
				if err := pprof.StartCPUProfile(pf); err != nil {
					return err
				}
				defer pprof.StopCPUProfile()
			}
			var r benchResult
			var err error
			switch {
			case o.scale > 0:
				r, err = runScale(cmd.Context(), e, o)
			case o.targets.only:
				r, err = runTargets(cmd.Context(), e, o)
			case o.submitOnly:
				r, err = runSubmit(cmd.Context(), e, o)
			default:
				r, err = runBench(cmd.Context(), e, o)
			}
			if err != nil {
				return err
			}
			if o.json {
				return json.NewEncoder(e.stdout).Encode(r)
			}
			r.print(e)
			return nil
		},
	}
	cmd.Flags().StringVar(&o.data, "data", "", "scratch directory (default: a temporary one, removed after)")
	cmd.Flags().IntVar(&o.jobs, "jobs", 2000, "/bin/true jobs for the throughput run")
	cmd.Flags().IntVar(&o.submitJobs, "submit-jobs", 50000, "jobs for each durable submit run (one a request, bulk, raw appends)")
	cmd.Flags().IntVar(&o.latJobs, "latency-jobs", 300, "jobs, one at a time, for the latency run")
	cmd.Flags().IntVar(&o.readJobs, "read-jobs", 1000, "jobs read through the API, one at a time, for the read latency")
	cmd.Flags().IntVar(&o.workers, "spawners", 8, "concurrent spawners for the raw spawn rate (the executor's workers)")
	cmd.Flags().BoolVar(&o.json, "json", false, "print JSON")
	cmd.Flags().StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run here")
	cmd.Flags().DurationVar(&o.rawFor, "raw-for", 3*time.Second, "how long each raw rate (spawn, job) is measured")
	cmd.Flags().StringVar(&o.memProfile, "memprofile", "", "write a heap profile here when the memory is measured")
	cmd.Flags().StringVar(&o.workRoot, "work-root", "", "job working directories for the local cluster (default: under --data); JetStream stays under --data")
	cmd.Flags().BoolVar(&o.allowRoot, "allow-root-jobs", false, "let the local cluster run the bench's /bin/true jobs as root (as serve --allow-root-jobs)")
	o.targets.flags(cmd)
	cmd.Flags().DurationVar(&o.settle, "settle", 0, "with --scale: after the reads, wait this long and measure the memory again (the embedded server keeps a block's subject state 2 minutes after its last use)")
	cmd.Flags().BoolVar(&o.submitOnly, "submit-only", false, "measure only the durable submit rows (one a request, bulk, raw appends): with --cpuprofile, a profile of those alone")
	cmd.Flags().StringVar(&o.natsServer, "nats-server", "", "with --scale: run this nats-server binary on the log and connect to it, as serve --nats-url does, so the RSS row is gridwire's process alone and the server's is printed apart (scripts/install-nats-server.sh installs the pinned one)")
	cmd.Flags().BoolVar(&o.noReplay, "no-replay", false, "with --scale: leave the replay out (at a million jobs it takes about ten minutes before the reads)")
	cmd.Flags().IntVar(&o.scale, "scale", 0, "instead of the pipeline run: build a log of this many whole job histories and measure reads, replay and RSS on it")
	return cmd
}

// benchResult is every figure one run measured; a zero figure was not measured in this
// mode.
type benchResult struct {
	CPUs               int     `json:"cpus"`
	Load               string  `json:"load"` // /proc/loadavg at the start and at the end
	RawSpawnPerSec     float64 `json:"raw_spawn_per_sec,omitempty"`
	RawJobPerSec       float64 `json:"raw_job_per_sec,omitempty"` // the mean of before and after
	RawJobBeforePerSec float64 `json:"raw_job_before_per_sec,omitempty"`
	RawJobAfterPerSec  float64 `json:"raw_job_after_per_sec,omitempty"`
	PipelinePerSec     float64 `json:"pipeline_jobs_per_sec,omitempty"`
	PipelineRatio      float64 `json:"pipeline_vs_raw_job,omitempty"`
	CPUPerJobMicros    float64 `json:"gridwire_cpu_per_job_us,omitempty"`
	ChildCPUPerJob     float64 `json:"children_cpu_per_job_us,omitempty"`
	LatencyP50Millis   float64 `json:"latency_p50_ms,omitempty"`
	LatencyP99Millis   float64 `json:"latency_p99_ms,omitempty"`
	// LatencyHops is the idle latency job's path, event by event in the log's order: the
	// median time from the previous event (the first: from the submit call) until each
	// was seen stored. The bus can show an event just before the one it follows (they
	// come from different connections); such a hop counts as 0.
	LatencyHops      []latencyHop `json:"latency_hops,omitempty"`
	RawJobP50Millis  float64      `json:"raw_job_p50_ms,omitempty"`
	RawJobP99Millis  float64      `json:"raw_job_p99_ms,omitempty"`
	SubmitPerSec     float64      `json:"durable_submit_per_sec,omitempty"`
	BulkSubmitPerSec float64      `json:"bulk_submit_per_sec,omitempty"`
	RawAppendPerSec  float64      `json:"raw_append_per_sec,omitempty"`
	// BareAppendPerSec: the same appends published bare (bareAppends), what the server
	// itself stores on this machine.
	BareAppendPerSec float64   `json:"bare_append_per_sec,omitempty"`
	ReplayPerSec     float64   `json:"replay_events_per_sec,omitempty"`
	RawConsumePerSec float64   `json:"raw_consume_events_per_sec,omitempty"`
	ReplayEvents     uint64    `json:"replay_events,omitempty"`
	Reads            reads     `json:"reads"`
	Ops              opsPerJob `json:"jetstream_per_job"`
	RSSMiB           float64   `json:"rss_mib,omitempty"`
	HeapMiB          float64   `json:"heap_mib,omitempty"`
	LogJobs          int       `json:"log_jobs"`
	LogEvents        uint64    `json:"log_events"`
	FillSeconds      float64   `json:"fill_seconds,omitempty"`
	CatchUpSeconds   float64   `json:"catch_up_seconds,omitempty"`
	StartSeconds     float64   `json:"start_seconds,omitempty"` // a process on the log: NATS recovering the store
	Jobs             int       `json:"jobs"`
	SubmitJobs       int       `json:"submit_jobs"`
	LatencyJobs      int       `json:"latency_jobs"`
	Scale            *scaleRow `json:"scale,omitempty"`
	Slurm            *slurmRow `json:"slurm,omitempty"`
	SSH              *sshRow   `json:"ssh,omitempty"`
	Skipped          []string  `json:"skipped,omitempty"`

	// CPU of the process (ingest, the store's client, the embedded server) per job of
	// each durable submit run: comparable across runs where the rates are the load's.
	SubmitCPUMicros     float64 `json:"durable_submit_cpu_per_job_us,omitempty"`
	BulkCPUMicros       float64 `json:"bulk_submit_cpu_per_job_us,omitempty"`
	RawAppendCPUMicros  float64 `json:"raw_append_cpu_per_job_us,omitempty"`
	BareAppendCPUMicros float64 `json:"bare_append_cpu_per_job_us,omitempty"`
}

// reads are latencies of job reads through the HTTP API, and of the yardstick: one
// direct get of the job's last event from the stream.
type reads struct {
	JobP50    float64 `json:"job_p50_ms"`
	JobP99    float64 `json:"job_p99_ms"`
	EventsP50 float64 `json:"events_p50_ms"`
	EventsP99 float64 `json:"events_p99_ms"`
	GetP50    float64 `json:"direct_get_p50_ms"`
	GetP99    float64 `json:"direct_get_p99_ms"`
	WalkP50   float64 `json:"store_walk_p50_ms"` // another job's events read by events.Store, no HTTP
	WalkP99   float64 `json:"store_walk_p99_ms"`
	N         int     `json:"n"`
}

func (r benchResult) print(e *env) {
	w := e.stdout
	fmt.Fprintf(w, "cpus %d; load (1/5/15 min) at start and end: %s", r.CPUs, r.Load)
	if r.LogJobs > 0 { // --targets-only builds no log
		fmt.Fprintf(w, "; log: %d jobs, %d events", r.LogJobs, r.LogEvents)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "%-46s %-30s %-36s %s\n", "figure", "gridwire", "yardstick (same run)", "goal")
	row := func(fig, val, yard, goal string) { fmt.Fprintf(w, "%-46s %-30s %-36s %s\n", fig, val, yard, goal) }
	if r.PipelinePerSec > 0 {
		row(fmt.Sprintf("pipeline, %d fork jobs", r.Jobs), fmt.Sprintf("%.0f jobs/s = %.2fx raw job", r.PipelinePerSec, r.PipelineRatio),
			fmt.Sprintf("raw job %.0f/s (%.0f before, %.0f after; spawn %.0f/s)", r.RawJobPerSec, r.RawJobBeforePerSec, r.RawJobAfterPerSec, r.RawSpawnPerSec), ">= 0.8x "+met(r.PipelineRatio >= 0.8))
		row("gridwire CPU per fork job", fmt.Sprintf("%.0f us", r.CPUPerJobMicros),
			fmt.Sprintf("the job's processes %.0f us", r.ChildCPUPerJob), "<= 500 us "+met(r.CPUPerJobMicros <= 500))
		fmt.Fprintf(w, "  JetStream per job: %.1f events stored, %.1f consumer deliveries, %.1f API requests, %.1f KV writes\n",
			r.Ops.Stored, r.Ops.Delivered, r.Ops.API, r.Ops.KV)
		row("idle submit->SUCCEEDED p50 / p99", fmt.Sprintf("%.2f / %.2f ms", r.LatencyP50Millis, r.LatencyP99Millis),
			fmt.Sprintf("raw job alone %.2f / %.2f ms", r.RawJobP50Millis, r.RawJobP99Millis),
			"<= 2.5 / 8 ms "+met(r.LatencyP50Millis <= 2.5 && r.LatencyP99Millis <= 8))
		if len(r.LatencyHops) > 0 {
			fmt.Fprint(w, "  idle job's hops, median ms from the previous event stored (p99):")
			for _, h := range r.LatencyHops {
				fmt.Fprintf(w, " %s %.2f (%.2f)", h.Event, h.P50Millis, h.P99Millis)
			}
			fmt.Fprintln(w)
		}
	}
	if r.SubmitPerSec > 0 {
		row(fmt.Sprintf("durable submit, one job a request (%d)", r.SubmitJobs), fmt.Sprintf("%.0f /s", r.SubmitPerSec),
			fmt.Sprintf("raw conditional appends %.0f/s", r.RawAppendPerSec), "")
		row(fmt.Sprintf("durable submit, bulk (%d)", r.SubmitJobs), fmt.Sprintf("%.0f /s", r.BulkSubmitPerSec),
			fmt.Sprintf("raw conditional appends %.0f/s", r.RawAppendPerSec), ">= 50,000/s "+met(r.BulkSubmitPerSec >= 50000))
		fmt.Fprintf(w, "  the same appends published bare, without the jetstream client (the server's own rate here): %.0f/s\n", r.BareAppendPerSec)
		fmt.Fprintf(w, "  CPU per submitted job (the process: ingest, the store's client, the embedded server): one a request %.1f us, bulk %.1f us; raw conditional appends %.1f us, bare %.1f us\n",
			r.SubmitCPUMicros, r.BulkCPUMicros, r.RawAppendCPUMicros, r.BareAppendCPUMicros)
	}
	if r.ReplayPerSec > 0 {
		row(fmt.Sprintf("replay, %d events", r.ReplayEvents), fmt.Sprintf("%.0f ev/s = %.2fx raw", r.ReplayPerSec, r.ReplayPerSec/r.RawConsumePerSec),
			fmt.Sprintf("raw consume %.0f ev/s", r.RawConsumePerSec), ">= 0.9x "+met(r.ReplayPerSec >= 0.9*r.RawConsumePerSec))
	}
	atScale := func(ok bool) string {
		if r.LogJobs < 1000000 {
			return "(not judged: --scale 1000000)"
		}
		return met(ok)
	}
	if r.Reads.N > 0 {
		row(fmt.Sprintf("GET /v1/jobs/{id} p50 / p99, %d jobs", r.LogJobs), fmt.Sprintf("%.2f / %.2f ms", r.Reads.JobP50, r.Reads.JobP99),
			fmt.Sprintf("direct get %.2f / %.2f ms", r.Reads.GetP50, r.Reads.GetP99), "p99 <= 20 ms "+atScale(r.Reads.JobP99 <= 20))
		row(fmt.Sprintf("GET /v1/jobs/{id}/events p50 / p99, %d jobs", r.LogJobs), fmt.Sprintf("%.2f / %.2f ms", r.Reads.EventsP50, r.Reads.EventsP99),
			fmt.Sprintf("store's walk, other job %.2f / %.2f ms", r.Reads.WalkP50, r.Reads.WalkP99), "p99 <= 20 ms "+atScale(r.Reads.EventsP99 <= 20))
	}
	if r.RSSMiB > 0 {
		what := "RSS, all services + NATS"
		switch {
		case r.Scale != nil && r.Scale.ExternalServer:
			what = "RSS, read side + ingest (NATS apart)"
		case r.CatchUpSeconds > 0:
			what = "RSS, read side + ingest + NATS"
		}
		row(fmt.Sprintf("%s, %d jobs", what, r.LogJobs), fmt.Sprintf("%.0f MiB", r.RSSMiB), fmt.Sprintf("Go heap in use %.0f MiB", r.HeapMiB),
			"<= 512 MiB "+atScale(r.RSSMiB <= 512))
	}
	printScale(w, r.Scale)
	if r.CatchUpSeconds > 0 {
		fmt.Fprintf(w, "log built in %.0f s (0: reused); a process started on it in %.1f s (NATS recovering the store); its read side caught up in %.1f s\n",
			r.FillSeconds, r.StartSeconds, r.CatchUpSeconds)
	}
	printTargets(w, row, r.Slurm, r.SSH)
	for _, s := range r.Skipped {
		fmt.Fprintf(w, "%-46s skipped: %s\n", strings.SplitN(s, ": ", 2)[0], strings.SplitN(s, ": ", 2)[1])
	}
}

func met(ok bool) string {
	if ok {
		return "(met)"
	}
	return "(NOT met)"
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

func runBench(ctx context.Context, e *env, o *benchOpts) (benchResult, error) {
	r := benchResult{CPUs: runtime.NumCPU(), Jobs: o.jobs, SubmitJobs: o.submitJobs, LatencyJobs: o.latJobs, Load: loadAvg()}
	var err error
	if r.RawSpawnPerSec, err = rawSpawnRate(ctx, o.workers, o.rawFor); err != nil {
		return r, err
	}
	root := o.workRoot
	if root == "" {
		root = filepath.Join(o.data, "pipeline", "jobs")
	}
	// The raw jobs' directories stay until the end: on ext4 a directory removed just
	// before the pipeline makes every inode it then creates dearer for a minute or more
	// (docs/operations.md), which would charge the yardstick's clean-up to gridwire.
	defer func() {
		for _, d := range []string{"raw", "raw1", "raw2"} {
			_ = os.RemoveAll(filepath.Join(root, d))
		}
	}()
	if r.RawJobP50Millis, r.RawJobP99Millis, err = rawJobLatency(o.latJobs, filepath.Join(root, "raw1")); err != nil {
		return r, err
	}
	if err := benchSubmit(ctx, e, o, filepath.Join(o.data, "submit"), o.submitJobs, &r); err != nil {
		return r, err
	}
	// The raw job rate is measured just before and just after the pipeline, and the
	// ratio is to their mean: the disk's pace drifts within a run.
	if r.RawJobBeforePerSec, err = rawJobRate(ctx, o.workers, o.rawFor, filepath.Join(root, "raw")); err != nil {
		return r, err
	}
	if err = benchPipeline(ctx, e, filepath.Join(o.data, "pipeline"), o, &r); err != nil {
		return r, err
	}
	if r.RawJobAfterPerSec, err = rawJobRate(ctx, o.workers, o.rawFor, filepath.Join(root, "raw2")); err != nil {
		return r, err
	}
	r.RawJobPerSec = (r.RawJobBeforePerSec + r.RawJobAfterPerSec) / 2
	r.PipelineRatio = r.PipelinePerSec / r.RawJobPerSec
	if err := benchTargets(ctx, e, o, &r); err != nil {
		return r, err
	}
	r.Load += " -> " + loadAvg()
	return r, nil
}

// runSubmit is --submit-only: the durable submit rows alone.
func runSubmit(ctx context.Context, e *env, o *benchOpts) (benchResult, error) {
	r := benchResult{CPUs: runtime.NumCPU(), SubmitJobs: o.submitJobs, Load: loadAvg()}
	if err := benchSubmit(ctx, e, o, filepath.Join(o.data, "submit"), o.submitJobs, &r); err != nil {
		return r, err
	}
	r.Load += " -> " + loadAvg()
	return r, nil
}

// rawSpawnRate is how many /bin/true processes this machine starts and reaps per second
// with the given concurrency: the ceiling for fork jobs.
func rawSpawnRate(ctx context.Context, workers int, d time.Duration) (float64, error) {
	var n atomic.Int64
	deadline := time.Now().Add(d)
	g, _ := errgroup.WithContext(ctx)
	start := time.Now()
	for range workers {
		g.Go(func() error {
			for time.Now().Before(deadline) {
				if err := exec.Command("/bin/true").Run(); err != nil {
					return err
				}
				n.Add(1)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return 0, err
	}
	return float64(n.Load()) / time.Since(start).Seconds(), nil
}

// rawJobRate is what a fork job costs without gridwire: its directories, a detached
// shell that records its PID, runs /bin/true with its output in files and writes the
// exit status, reaped by the spawner. On a slow disk this, not the spawn, is the floor.
func rawJobRate(ctx context.Context, workers int, d time.Duration, root string) (float64, error) {
	if err := os.MkdirAll(root, 0o700); err != nil {
		return 0, err
	}
	// root is left for the caller to remove (runBench: at the end of the run).
	var n atomic.Int64
	deadline := time.Now().Add(d)
	g, _ := errgroup.WithContext(ctx)
	start := time.Now()
	for w := range workers {
		g.Go(func() error {
			for i := 0; time.Now().Before(deadline); i++ {
				if err := rawJob(filepath.Join(root, fmt.Sprintf("%d-%d", w, i))); err != nil {
					return err
				}
				n.Add(1)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return 0, err
	}
	return float64(n.Load()) / time.Since(start).Seconds(), nil
}

// rawJobLatency runs n raw jobs one at a time: their p50 and p99, in milliseconds.
func rawJobLatency(n int, root string) (p50, p99 float64, err error) {
	if err := os.MkdirAll(root, 0o700); err != nil {
		return 0, 0, err
	}
	// root is left for the caller to remove (runBench: at the end of the run).
	lat := make([]time.Duration, 0, n)
	for i := range n {
		t0 := time.Now()
		if err := rawJob(filepath.Join(root, fmt.Sprint(i))); err != nil {
			return 0, 0, err
		}
		lat = append(lat, time.Since(t0))
	}
	p50, p99 = quantiles(lat)
	return p50, p99, nil
}

// rawJob is one fork job without gridwire, in working directory wd.
func rawJob(wd string) error {
	const script = "echo $$ >.gridwire/native_id\n/bin/true </dev/null >.gridwire/stdout 2>.gridwire/stderr\necho $? >.gridwire/exit_status\n"
	if err := os.Mkdir(wd, 0o700); err != nil {
		return err
	}
	if err := os.Mkdir(filepath.Join(wd, ".gridwire"), 0o700); err != nil {
		return err
	}
	cmd := exec.Command("/bin/sh", "-c", script)
	cmd.Dir = wd
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	return cmd.Run()
}

func benchSystem(ctx context.Context, e *env, o *benchOpts, dir string, services []string) (*benchServices, error) {
	return benchSystemWith(ctx, e, o, dir, services, nil)
}

// benchServices are a bench's services, running on a system of their own.
type benchServices struct {
	*system
	// ctx is done as soon as any service stops (context.Cause says why) and once the
	// services are stopped: a bench waits on it, so a service that fails ends the wait
	// at once instead of leaving it to its time limit.
	ctx    context.Context
	g      *errgroup.Group
	cancel context.CancelFunc
}

// stop ends the services, waits for them and closes their system.
func (b *benchServices) stop() {
	b.cancel()
	_ = b.g.Wait()
	b.close()
}

// why is err, unless err came of a service stopping: then it is what stopped it.
func (b *benchServices) why(err error) error {
	if err == nil || b.ctx.Err() == nil {
		return err
	}
	if cause := context.Cause(b.ctx); cause != nil && !errors.Is(cause, context.Canceled) {
		return fmt.Errorf("the services stopped: %w", cause)
	}
	return err
}

// benchSystemWith starts services on an embedded server in dir, on clusters (nil: the
// local fork cluster); --work-root applies to the clusters that name no work root.
func benchSystemWith(ctx context.Context, e *env, o *benchOpts, dir string, services []string, clusters []cluster.Cluster) (*benchServices, error) {
	quiet := &env{getenv: func(string) string { return "" }, stdout: e.stdout, stderr: e.stderr}
	sys, err := openSystem(ctx, quiet, &busFlags{data: dir, natsURL: o.natsURL, logLevel: "error", stateCacheMiB: 256}, true)
	if err != nil {
		return nil, err
	}
	if slices.Contains(services, "readside") {
		// The read API on loopback, for the read latencies.
		if sys.listener, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			sys.close()
			return nil, err
		}
	}
	sys.allowRootJobs = o.allowRoot
	if clusters != nil {
		sys.cfg.Clusters = clusters
	}
	for i := range sys.cfg.Clusters {
		if o.workRoot != "" && sys.cfg.Clusters[i].WorkRoot == "" {
			sys.cfg.Clusters[i].WorkRoot = o.workRoot
		}
	}
	sctx, cancel := context.WithCancel(ctx)
	g, gctx := errgroup.WithContext(sctx)
	if err := sys.start(gctx, g, services, nil); err != nil {
		cancel()
		sys.close()
		return nil, err
	}
	return &benchServices{system: sys, ctx: gctx, g: g, cancel: cancel}, nil
}

func trueJob() []byte { return []byte(`{"version":3,"executable":"/bin/true"}`) }

// benchSubmit: durable submissions with only ingest running, so nothing executes: one
// job a request from 64 goroutines, bulk requests of 1,000 from 4, and the yardstick,
// JetStream's own pipelined conditional appends of the same number of submitted events.
func benchSubmit(ctx context.Context, e *env, o *benchOpts, dir string, n int, r *benchResult) error {
	sys, err := benchSystem(ctx, e, o, dir, []string{"ingest"})
	if err != nil {
		return err
	}
	defer sys.stop()
	if r.SubmitPerSec, r.SubmitCPUMicros, err = cpuPerJob(n, func() (float64, error) { return submitMany(ctx, sys.ingest, n, 64) }); err != nil {
		return err
	}
	if r.BulkSubmitPerSec, r.BulkCPUMicros, err = cpuPerJob(n, func() (float64, error) { return submitBulkRate(ctx, sys.ingest, n, 1000, 4) }); err != nil {
		return err
	}
	if r.RawAppendPerSec, r.RawAppendCPUMicros, err = rawAppends(ctx, sys.bus.JS, n); err != nil {
		return err
	}
	r.BareAppendPerSec, r.BareAppendCPUMicros, err = bareAppends(ctx, sys.bus.Conn, n)
	return err
}

// cpuPerJob runs one rate measurement of n jobs and adds the process's CPU per job
// during it.
func cpuPerJob(n int, run func() (float64, error)) (rate, micros float64, err error) {
	before, _ := cpuTimes()
	rate, err = run()
	after, _ := cpuTimes()
	return rate, float64((after - before).Microseconds()) / float64(n), err
}

// submitBulkRate submits n /bin/true jobs in bulk requests of size from conc goroutines.
func submitBulkRate(ctx context.Context, svc *ingest.Service, n, size, conc int) (float64, error) {
	var next atomic.Int64
	g, gctx := errgroup.WithContext(ctx)
	start := time.Now()
	for range conc {
		g.Go(func() error {
			for {
				end := next.Add(int64(size))
				from := end - int64(size)
				if from >= int64(n) {
					return nil
				}
				subs := make([]ingest.Submission, min(end, int64(n))-from)
				for i := range subs {
					subs[i] = ingest.Submission{File: "bench.json", Data: trueJob(), Submitter: "bench"}
				}
				for _, res := range svc.SubmitAll(gctx, subs) {
					if res.Error != nil {
						return res.Error
					}
				}
			}
		})
	}
	if err := g.Wait(); err != nil {
		return 0, err
	}
	return float64(n) / time.Since(start).Seconds(), nil
}

// rawAppends is the yardstick of durable submission: n submitted events, encoded
// beforehand, appended conditionally (no earlier event of the job) with their message
// IDs, pipelined in windows of 512 from 4 goroutines, each acknowledged by the stream;
// with the process's CPU per append (the encoding beforehand left out).
func rawAppends(ctx context.Context, js jetstream.JetStream, n int) (rate, cpuMicros float64, err error) {
	msgs, ids, err := submittedMsgs(n)
	if err != nil {
		return 0, 0, err
	}
	for _, m := range msgs {
		m.Header = nats.Header{}
	}
	return appendRate(ctx, n, func(ctx context.Context) (func(from, to int) error, func(), error) {
		return func(from, to int) error {
			futures := make([]jetstream.PubAckFuture, 0, to-from)
			for i := from; i < to; i++ {
				jobID, _ := events.JobOfSubject(msgs[i].Subject)
				f, err := js.PublishMsgAsync(msgs[i], jetstream.WithMsgID(ids[i]),
					jetstream.WithExpectLastSequenceForSubject(0, events.JobFilter(jobID)))
				if err != nil {
					return err
				}
				futures = append(futures, f)
			}
			for _, f := range futures {
				select {
				case <-f.Ok():
				case err := <-f.Err():
					return err
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			return nil
		}, func() {}, nil
	})
}

// appendRate makes n appends in windows of 512 from 4 goroutines, each sending its
// windows through a sender of its own (newSender's, stopped when it is done), and
// returns their rate and the process's CPU per append.
func appendRate(ctx context.Context, n int, newSender func(ctx context.Context) (send func(from, to int) error, stop func(), err error)) (rate, cpuMicros float64, err error) {
	var next atomic.Int64
	g, gctx := errgroup.WithContext(ctx)
	cpu0, _ := cpuTimes()
	start := time.Now()
	for range 4 {
		g.Go(func() error {
			send, stop, err := newSender(gctx)
			if err != nil {
				return err
			}
			defer stop()
			for {
				end := next.Add(512)
				from := end - 512
				if from >= int64(n) {
					return nil
				}
				if err := send(int(from), min(int(end), n)); err != nil {
					return err
				}
			}
		})
	}
	if err := g.Wait(); err != nil {
		return 0, 0, err
	}
	rate = float64(n) / time.Since(start).Seconds()
	cpu1, _ := cpuTimes()
	return rate, float64((cpu1 - cpu0).Microseconds()) / float64(n), nil
}

// submittedMsgs are n submitted events of new jobs, encoded, each with the headers of a
// conditional append (its message ID, no earlier event of its job), and their IDs.
func submittedMsgs(n int) ([]*nats.Msg, []string, error) {
	msgs := make([]*nats.Msg, n)
	ids := make([]string, n)
	for i := range msgs {
		id := events.NewID()
		e, err := events.New(id, events.Submitted, "", time.Now(), events.Job{ID: id, Executable: "/bin/true", Submitter: "bench"})
		if err != nil {
			return nil, nil, err
		}
		e.Source = "bench"
		body, err := e.Encode()
		if err != nil {
			return nil, nil, err
		}
		msgs[i], ids[i] = &nats.Msg{Subject: events.Subject(id, events.Submitted, ""), Data: body, Header: nats.Header{
			jetstream.MsgIDHeader: {e.ID}, jetstream.ExpectedLastSubjSeqHeader: {"0"},
			jetstream.ExpectedLastSubjSeqSubjHeader: {events.JobFilter(id)},
		}}, e.ID
	}
	return msgs, ids, nil
}

// bareAppends is the server's own rate for the same appends as rawAppends: the same
// messages and headers, published bare on the connection with a reply subject each and
// their acknowledgements counted off one subscription per goroutine, as the store's own
// pipe does, without the jetstream client's futures. It says what the server on this
// machine can store, which the jetstream client's rate does not.
func bareAppends(ctx context.Context, nc *nats.Conn, n int) (rate, cpuMicros float64, err error) {
	msgs, _, err := submittedMsgs(n)
	if err != nil {
		return 0, 0, err
	}
	return appendRate(ctx, n, func(ctx context.Context) (func(from, to int) error, func(), error) {
		inbox := nc.NewInbox()
		acks := make(chan *nats.Msg, 1024) // at most a window (512) of answers is ever pending
		sub, err := nc.ChanSubscribe(inbox+".*", acks)
		if err != nil {
			return nil, nil, err
		}
		reply := make([]byte, 0, len(inbox)+12)
		return func(from, to int) error {
			for i := from; i < to; i++ {
				reply = strconv.AppendInt(append(append(reply[:0], inbox...), '.'), int64(i), 10)
				msgs[i].Reply = string(reply)
				if err := nc.PublishMsg(msgs[i]); err != nil {
					return err
				}
			}
			for range to - from {
				select {
				case a := <-acks:
					if bytes.Contains(a.Data, []byte(`"error"`)) || !bytes.Contains(a.Data, []byte(`"seq"`)) {
						return fmt.Errorf("bench: a bare append was answered %q", a.Data)
					}
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			return nil
		}, func() { _ = sub.Unsubscribe() }, nil
	})
}

func submitMany(ctx context.Context, svc *ingest.Service, n, conc int) (float64, error) {
	rate, _, err := submitManyIDs(ctx, svc, n, conc)
	return rate, err
}

// submitManyIDs submits n /bin/true jobs from conc goroutines and returns their IDs.
func submitManyIDs(ctx context.Context, svc *ingest.Service, n, conc int) (float64, []string, error) {
	var next atomic.Int64
	ids := make([]string, n)
	g, gctx := errgroup.WithContext(ctx)
	start := time.Now()
	for range conc {
		g.Go(func() error {
			for i := next.Add(1); i <= int64(n); i = next.Add(1) {
				acc, err := svc.Submit(gctx, ingest.Submission{File: "bench.json", Data: trueJob(), Submitter: "bench"})
				if err != nil {
					return err
				}
				ids[i-1] = acc.Jobs[0]
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return 0, nil, err
	}
	return float64(n) / time.Since(start).Seconds(), ids, nil
}

// benchPipeline runs every service and measures throughput, then idle latency.
func benchPipeline(ctx context.Context, e *env, dir string, o *benchOpts, r *benchResult) error {
	sys, err := benchSystem(ctx, e, o, dir, allServices)
	if err != nil {
		return err
	}
	defer sys.stop()
	// A service that stops early ends every wait below at once, and says why.
	run := sys.ctx
	ends := newEndWatch()
	sub, err := sys.bus.Conn.Subscribe(events.SubjectEvent, ends.observe)
	if err != nil {
		return err
	}
	defer sub.Unsubscribe()
	_ = sub.SetPendingLimits(-1, -1)
	// The server has the subscription before the first job is submitted (from ingest's own
	// connection), so no job's first event goes unseen.
	if err := sys.bus.Conn.Flush(); err != nil {
		return err
	}

	// Throughput: everything at once.
	ops0, err := countJS(ctx, sys.bus.JS)
	if err != nil {
		return err
	}
	self0, child0 := cpuTimes()
	start := time.Now()
	_, ids, err := submitManyIDs(run, sys.ingest, o.jobs, 16)
	if err != nil {
		return sys.why(err)
	}
	if err := ends.waitCount(run, o.jobs, 2*time.Minute); err != nil {
		return fmt.Errorf("%w; %s", sys.why(err), unfinished(ctx, sys.system, ends, ids))
	}
	r.PipelinePerSec = float64(o.jobs) / time.Since(start).Seconds()
	self1, child1 := cpuTimes()
	ops1, err := countJS(ctx, sys.bus.JS)
	if err != nil {
		return err
	}
	r.Ops = perJob(ops0, ops1, o.jobs)
	r.CPUPerJobMicros = float64((self1 - self0).Microseconds()) / float64(o.jobs)
	r.ChildCPUPerJob = float64((child1 - child0).Microseconds()) / float64(o.jobs)
	if f := ends.failures(); f > 0 {
		return fmt.Errorf("bench: %d of %d jobs did not succeed", f, o.jobs)
	}

	// Latency: one job at a time on an otherwise idle system.
	lat := make([]time.Duration, 0, o.latJobs)
	ends.keepPaths()
	st := events.NewStore(sys.bus.Conn, sys.bus.JS, "bench")
	hops := map[events.Name][]time.Duration{}
	var order []events.Name
	for range o.latJobs {
		t0 := time.Now()
		acc, err := sys.ingest.Submit(run, ingest.Submission{File: "bench.json", Data: trueJob(), Submitter: "bench"})
		if err != nil {
			return sys.why(err)
		}
		if err := ends.waitJob(run, acc.Jobs[0], time.Minute); err != nil {
			return sys.why(err)
		}
		lat = append(lat, time.Since(t0))
		// The hops follow the log's order. The bus may show an event before the one that
		// caused it (they come from different connections), so the job's stored history
		// says the order, and each of its events is awaited on the bus.
		h, err := st.Load(run, acc.Jobs[0])
		if err != nil {
			return sys.why(err)
		}
		seen, err := ends.waitPath(run, acc.Jobs[0], h.Events, 10*time.Second)
		if err != nil {
			return sys.why(err)
		}
		prev := t0
		for i, e := range h.Events {
			if len(order) <= i {
				order = append(order, e.Name)
			}
			at := seen[i]
			if order[i] == e.Name {
				hops[e.Name] = append(hops[e.Name], max(at.Sub(prev), 0)) // seen out of order: 0
			}
			prev = at
		}
	}
	r.LatencyP50Millis, r.LatencyP99Millis = quantiles(lat)
	for _, n := range order {
		p50, p99 := quantiles(hops[n])
		r.LatencyHops = append(r.LatencyHops, latencyHop{Event: n, P50Millis: p50, P99Millis: p99})
	}
	return sys.why(afterPipeline(run, sys.system, ids, o, r))
}

// unfinished describes up to five jobs that did not end, for a bench that timed out.
func unfinished(ctx context.Context, sys *system, ends *endWatch, ids []string) string {
	st := events.NewStore(sys.bus.Conn, sys.bus.JS, "bench")
	var out []string
	ends.mu.Lock()
	defer ends.mu.Unlock()
	for _, id := range ids {
		if _, ok := ends.ended[id]; ok || len(out) == 5 {
			continue
		}
		h, err := st.Load(ctx, id)
		if err != nil || len(h.Events) == 0 {
			out = append(out, fmt.Sprintf("%s: %v", id, err))
			continue
		}
		s, _ := events.Replay(h.Events)
		out = append(out, fmt.Sprintf("%s: %s after %s", id, s.Status, h.Events[len(h.Events)-1].Name))
	}
	return fmt.Sprintf("%d of %d ended; unfinished: %v", len(ends.ended), len(ids), out)
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// endWatch counts terminal events seen on the bus (core NATS sees every stored event),
// and when each kind of event was first and last seen: where a slow run spent its time.
type endWatch struct {
	mu     sync.Mutex
	cond   *sync.Cond
	ended  map[string]events.Name
	failed int
	seen   map[events.Name]*phase
	paths  map[string][]sighting // each job's events as seen, once keepPaths was called
}

// sighting is one event of a job seen on the bus.
type sighting struct {
	name events.Name
	at   time.Time
}

// latencyHop is one step of the idle latency job: the event, and how long after the
// one before it (the first: after the submit call began) it was seen stored.
type latencyHop struct {
	Event     events.Name `json:"event"`
	P50Millis float64     `json:"p50_ms"`
	P99Millis float64     `json:"p99_ms"`
}

// keepPaths starts keeping each job's events with the time each was seen.
func (w *endWatch) keepPaths() {
	w.mu.Lock()
	w.paths = map[string][]sighting{}
	w.mu.Unlock()
}

// waitPath waits until each of a job's stored events has been seen on the bus, and
// returns when each was first seen (the i-th: history[i]'s), forgetting the job's
// sightings.
func (w *endWatch) waitPath(ctx context.Context, id string, history []events.Event, limit time.Duration) ([]time.Time, error) {
	var at []time.Time
	match := func() bool {
		at = at[:0]
		used := make([]bool, len(w.paths[id]))
	next:
		for _, e := range history {
			for k, s := range w.paths[id] {
				if !used[k] && s.name == e.Name {
					used[k] = true
					at = append(at, s.at)
					continue next
				}
			}
			return false
		}
		return true
	}
	if err := w.waitUntil(ctx, limit, "not every stored event was seen on the bus", match); err != nil {
		return nil, fmt.Errorf("job %s: %w", id, err)
	}
	w.mu.Lock()
	delete(w.paths, id)
	w.mu.Unlock()
	return at, nil
}

// phase is when events of one name were seen.
type phase struct {
	first, last time.Time
	n           int
}

func newEndWatch() *endWatch {
	w := &endWatch{ended: map[string]events.Name{}, seen: map[events.Name]*phase{}}
	w.cond = sync.NewCond(&w.mu)
	return w
}

func (w *endWatch) observe(m *nats.Msg) {
	id, name, _, err := events.ParseSubject(m.Subject)
	if err != nil {
		return
	}
	now := time.Now()
	w.mu.Lock()
	p := w.seen[name]
	if p == nil {
		p = &phase{first: now}
		w.seen[name] = p
	}
	p.last, p.n = now, p.n+1
	keeping := w.paths != nil
	if keeping {
		w.paths[id] = append(w.paths[id], sighting{name, now})
	}
	if !name.Terminal() {
		w.mu.Unlock()
		if keeping { // waitPath waits for every event
			w.cond.Broadcast()
		}
		return
	}
	if _, seen := w.ended[id]; !seen {
		w.ended[id] = name
		if name != events.Succeeded {
			w.failed++
		}
	}
	w.mu.Unlock()
	w.cond.Broadcast()
}

// timeline says, for each event name in life order, how many were seen and from when to
// when, in seconds after start.
func (w *endWatch) timeline(start time.Time) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var b strings.Builder
	for _, name := range events.Names() {
		if p := w.seen[name]; p != nil {
			fmt.Fprintf(&b, "%s %d %.2f-%.2fs; ", name, p.n, p.first.Sub(start).Seconds(), p.last.Sub(start).Seconds())
		}
	}
	return strings.TrimSuffix(b.String(), "; ")
}

func (w *endWatch) failures() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.failed
}

// waitUntil waits for done, under w.mu; past the limit it says what did not happen.
func (w *endWatch) waitUntil(ctx context.Context, limit time.Duration, what string, done func() bool) error {
	stop := context.AfterFunc(ctx, w.cond.Broadcast)
	defer stop()
	timer := time.AfterFunc(limit, w.cond.Broadcast)
	defer timer.Stop()
	deadline := time.Now().Add(limit)
	w.mu.Lock()
	defer w.mu.Unlock()
	for !done() {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("bench: %s within %v", what, limit)
		}
		w.cond.Wait()
	}
	return nil
}

func (w *endWatch) waitCount(ctx context.Context, n int, limit time.Duration) error {
	return w.waitUntil(ctx, limit, "jobs did not end", func() bool { return len(w.ended) >= n })
}

func (w *endWatch) waitJob(ctx context.Context, id string, limit time.Duration) error {
	return w.waitUntil(ctx, limit, "the job did not end", func() bool { _, ok := w.ended[id]; return ok })
}

// cpuTimes returns user+system CPU of this process and of its reaped children.
func cpuTimes() (self, children time.Duration) {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	self = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru)
	children = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	return self, children
}
