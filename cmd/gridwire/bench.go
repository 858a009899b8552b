package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/services/ingest"
	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"
)

type benchOpts struct {
	data       string
	jobs       int
	submitJobs int
	latJobs    int
	workers    int
	json       bool
	cpuProfile string
	workRoot   string
}

func benchCmd(e *env) *cobra.Command {
	o := &benchOpts{}
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "measure spawn-rate ratio, durable submit throughput and idle latency in one run",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
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
			r, err := runBench(cmd.Context(), e, o)
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
	cmd.Flags().IntVar(&o.submitJobs, "submit-jobs", 50000, "jobs for the durable submit run")
	cmd.Flags().IntVar(&o.latJobs, "latency-jobs", 300, "jobs, one at a time, for the latency run")
	cmd.Flags().IntVar(&o.workers, "spawners", 8, "concurrent spawners for the raw spawn rate (the executor's workers)")
	cmd.Flags().BoolVar(&o.json, "json", false, "print JSON")
	cmd.Flags().StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run here")
	cmd.Flags().StringVar(&o.workRoot, "work-root", "", "job working directories for the local cluster (default: under --data); JetStream stays under --data")
	return cmd
}

type benchResult struct {
	CPUs             int     `json:"cpus"`
	RawSpawnPerSec   float64 `json:"raw_spawn_per_sec"`
	RawJobPerSec     float64 `json:"raw_job_per_sec"`
	PipelinePerSec   float64 `json:"pipeline_jobs_per_sec"`
	PipelineRatio    float64 `json:"pipeline_vs_spawn"`
	SubmitPerSec     float64 `json:"durable_submit_per_sec"`
	LatencyP50Millis float64 `json:"latency_p50_ms"`
	LatencyP99Millis float64 `json:"latency_p99_ms"`
	CPUPerJobMicros  float64 `json:"gridwire_cpu_per_job_us"`
	ChildCPUPerJob   float64 `json:"children_cpu_per_job_us"`
	Jobs             int     `json:"jobs"`
	SubmitJobs       int     `json:"submit_jobs"`
	LatencyJobs      int     `json:"latency_jobs"`
}

func (r benchResult) print(e *env) {
	fmt.Fprintf(e.stdout, "cpus                                  %d\n", r.CPUs)
	fmt.Fprintf(e.stdout, "raw spawn rate (/bin/true)            %.0f /s\n", r.RawSpawnPerSec)
	fmt.Fprintf(e.stdout, "raw job rate (same files, no gridwire) %.0f /s\n", r.RawJobPerSec)
	fmt.Fprintf(e.stdout, "submit->terminal throughput (%d jobs) %.0f jobs/s  (%.2fx spawn rate; goal >= 0.9x)\n", r.Jobs, r.PipelinePerSec, r.PipelineRatio)
	fmt.Fprintf(e.stdout, "  cpu per job: gridwire %.0f us, the job's processes %.0f us\n", r.CPUPerJobMicros, r.ChildCPUPerJob)
	fmt.Fprintf(e.stdout, "durable submit (%d jobs)             %.0f jobs/s  (goal >= 20000)\n", r.SubmitJobs, r.SubmitPerSec)
	fmt.Fprintf(e.stdout, "submit->SUCCEEDED latency, idle       p50 %.2f ms  p99 %.2f ms  (goal p50 <= 5 ms)\n", r.LatencyP50Millis, r.LatencyP99Millis)
}

func runBench(ctx context.Context, e *env, o *benchOpts) (benchResult, error) {
	r := benchResult{CPUs: runtime.NumCPU(), Jobs: o.jobs, SubmitJobs: o.submitJobs, LatencyJobs: o.latJobs}
	var err error
	if r.RawSpawnPerSec, err = rawSpawnRate(ctx, o.workers, 3*time.Second); err != nil {
		return r, err
	}
	root := o.workRoot
	if root == "" {
		root = filepath.Join(o.data, "pipeline", "jobs")
	}
	if r.RawJobPerSec, err = rawJobRate(ctx, o.workers, 3*time.Second, filepath.Join(root, "raw")); err != nil {
		return r, err
	}
	if r.SubmitPerSec, err = benchSubmit(ctx, e, filepath.Join(o.data, "submit"), o.submitJobs); err != nil {
		return r, err
	}
	if err = benchPipeline(ctx, e, filepath.Join(o.data, "pipeline"), o, &r); err != nil {
		return r, err
	}
	r.PipelineRatio = r.PipelinePerSec / r.RawSpawnPerSec
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
	defer os.RemoveAll(root)
	var n atomic.Int64
	deadline := time.Now().Add(d)
	g, _ := errgroup.WithContext(ctx)
	start := time.Now()
	script := "echo $$ >.gridwire/native_id\n/bin/true </dev/null >.gridwire/stdout 2>.gridwire/stderr\necho $? >.gridwire/exit_status\n"
	for w := range workers {
		g.Go(func() error {
			for i := 0; time.Now().Before(deadline); i++ {
				wd := filepath.Join(root, fmt.Sprintf("%d-%d", w, i))
				if err := os.Mkdir(wd, 0o700); err != nil {
					return err
				}
				if err := os.Mkdir(filepath.Join(wd, ".gridwire"), 0o700); err != nil {
					return err
				}
				cmd := exec.Command("/bin/sh", "-c", script)
				cmd.Dir = wd
				cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
				if err := cmd.Run(); err != nil {
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

func benchSystem(ctx context.Context, e *env, dir string, services []string, workRoot string) (*system, *errgroup.Group, context.CancelFunc, error) {
	quiet := &env{getenv: func(string) string { return "" }, stdout: e.stdout, stderr: e.stderr}
	sys, err := openSystem(ctx, quiet, &busFlags{data: dir, logLevel: "error"}, true)
	if err != nil {
		return nil, nil, nil, err
	}
	for i := range sys.cfg.Clusters {
		if workRoot != "" {
			sys.cfg.Clusters[i].WorkRoot = workRoot
		}
	}
	sctx, cancel := context.WithCancel(ctx)
	g, gctx := errgroup.WithContext(sctx)
	if err := sys.start(gctx, g, services, nil); err != nil {
		cancel()
		sys.close()
		return nil, nil, nil, err
	}
	return sys, g, cancel, nil
}

func trueJob() []byte { return []byte(`{"version":3,"executable":"/bin/true"}`) }

// benchSubmit: durable submissions with only ingest running, so nothing executes.
func benchSubmit(ctx context.Context, e *env, dir string, n int) (float64, error) {
	sys, g, cancel, err := benchSystem(ctx, e, dir, []string{"ingest"}, "")
	if err != nil {
		return 0, err
	}
	defer sys.close()
	defer func() { cancel(); _ = g.Wait() }()
	rate, err := submitMany(ctx, sys.ingest, n, 64)
	return rate, err
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
	sys, g, cancel, err := benchSystem(ctx, e, dir, allServices, o.workRoot)
	if err != nil {
		return err
	}
	defer sys.close()
	// A service that stops early is reported, not waited for in silence.
	stopped := make(chan error, 1)
	go func() { stopped <- g.Wait() }()
	defer func() { cancel(); <-stopped }()
	ends := newEndWatch()
	sub, err := sys.bus.Conn.Subscribe(events.SubjectEvent, ends.observe)
	if err != nil {
		return err
	}
	defer sub.Unsubscribe()
	_ = sub.SetPendingLimits(-1, -1)

	// Throughput: everything at once.
	self0, child0 := cpuTimes()
	start := time.Now()
	_, ids, err := submitManyIDs(ctx, sys.ingest, o.jobs, 16)
	if err != nil {
		return err
	}
	if err := ends.waitCount(ctx, o.jobs, 2*time.Minute); err != nil {
		select {
		case serr := <-stopped:
			stopped <- serr
			return fmt.Errorf("%w; the services stopped: %v; %s", err, serr, unfinished(ctx, sys, ends, ids))
		default:
			return fmt.Errorf("%w; services still running; %s", err, unfinished(ctx, sys, ends, ids))
		}
	}
	r.PipelinePerSec = float64(o.jobs) / time.Since(start).Seconds()
	self1, child1 := cpuTimes()
	r.CPUPerJobMicros = float64((self1 - self0).Microseconds()) / float64(o.jobs)
	r.ChildCPUPerJob = float64((child1 - child0).Microseconds()) / float64(o.jobs)
	if f := ends.failures(); f > 0 {
		return fmt.Errorf("bench: %d of %d jobs did not succeed", f, o.jobs)
	}

	// Latency: one job at a time on an otherwise idle system.
	lat := make([]time.Duration, 0, o.latJobs)
	for range o.latJobs {
		t0 := time.Now()
		acc, err := sys.ingest.Submit(ctx, ingest.Submission{File: "bench.json", Data: trueJob(), Submitter: "bench"})
		if err != nil {
			return err
		}
		if err := ends.waitJob(ctx, acc.Jobs[0], time.Minute); err != nil {
			return err
		}
		lat = append(lat, time.Since(t0))
	}
	slices.Sort(lat)
	r.LatencyP50Millis = ms(lat[len(lat)/2])
	r.LatencyP99Millis = ms(lat[len(lat)*99/100])
	return nil
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
	if !name.Terminal() {
		w.mu.Unlock()
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

func (w *endWatch) waitUntil(ctx context.Context, limit time.Duration, done func() bool) error {
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
			return fmt.Errorf("bench: jobs did not end within %v", limit)
		}
		w.cond.Wait()
	}
	return nil
}

func (w *endWatch) waitCount(ctx context.Context, n int, limit time.Duration) error {
	return w.waitUntil(ctx, limit, func() bool { return len(w.ended) >= n })
}

func (w *endWatch) waitJob(ctx context.Context, id string, limit time.Duration) error {
	return w.waitUntil(ctx, limit, func() bool { _, ok := w.ended[id]; return ok })
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
