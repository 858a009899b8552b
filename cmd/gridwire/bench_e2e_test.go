//go:build e2e

package main

import (
	"context"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/pkg/benchrun"
	"github.com/gridwire/gridwire/pkg/bus"
	"github.com/gridwire/gridwire/pkg/cluster"
	"github.com/gridwire/gridwire/pkg/sshx/sshtest"
	"github.com/gridwire/gridwire/services/ingest"
	"github.com/nats-io/nats.go"
	"golang.org/x/sync/errgroup"
)

// Benchmarks of whole runs against real targets, each compared with the target's own
// tool in the same run. Run with -benchtime 1x (see services/executor/BENCHMARKS.md).

const benchJobs = 300

// slurmBenchJobs is larger: at Slurm's pace the last poll's delay would weigh on a short run.
const slurmBenchJobs = 1000

// pipelineRate submits n /bin/true jobs and returns jobs/s from the first submission
// to the last terminal state. Ends are seen on the bus as they are stored (no polling:
// a poll of every open job would load the machine the targets share), and the run's
// timeline is logged.
func pipelineRate(b *testing.B, h *e2ePipeline, n int) float64 {
	b.Helper()
	ends := newEndWatch()
	sub, err := h.conn.Subscribe(events.SubjectEvent, ends.observe)
	if err != nil {
		b.Fatal(err)
	}
	defer sub.Unsubscribe()
	_ = sub.SetPendingLimits(-1, -1)
	doc := []byte(`{"version": 3, "executable": "/bin/true"}`)
	start := time.Now()
	for i := 0; i < n; i++ {
		if _, err := h.submit.Submit(context.Background(), ingest.Submission{File: "bench.json", Data: doc, Submitter: "bench"}); err != nil {
			b.Fatal(err)
		}
	}
	if err := ends.waitCount(context.Background(), n, 10*time.Minute); err != nil {
		b.Fatal(err)
	}
	rate := float64(n) / time.Since(start).Seconds()
	if f := ends.failures(); f > 0 {
		b.Fatalf("%d of %d jobs did not succeed", f, n)
	}
	b.Logf("gridwire timeline: %s", ends.timeline(start))
	return rate
}

// parallel runs fn n times, 8 at a time (the executor's default workers), and returns runs/s.
func parallel(b *testing.B, n int, fn func() error) float64 {
	b.Helper()
	return benchrun.Concurrently(b, n, 8, fn)
}

// BenchmarkE2ESSHCluster: /bin/true jobs end to end on an ssh cluster (a real sshd on
// loopback, the fork profile) against OpenSSH running `true` over a ControlMaster
// connection, both one command at a time (as a script calling ssh in a loop does) and
// 8 at a time.
func BenchmarkE2ESSHCluster(b *testing.B) {
	srv := sshtest.StartOpenSSH(b)
	control := filepath.Join(srv.Dir, "..", "cm-%C")
	args := append(srv.SSHArgs(), "-o", "ControlMaster=auto", "-o", "ControlPath="+control, "-o", "ControlPersist=120")
	if out, err := exec.Command("ssh", append(args, "127.0.0.1", "true")...).CombinedOutput(); err != nil {
		b.Fatalf("ssh: %v %s", err, out)
	}
	defer exec.Command("ssh", append(args, "-O", "exit", "127.0.0.1")...).Run()
	workRoot := srv.Dir
	if os.Getenv("GRIDWIRE_BENCH_WORK_ROOT") != "" {
		workRoot = benchWorkRoot(b)
		srv.Own(b, workRoot)
	}
	cfg := cluster.Config{Clusters: []cluster.Cluster{{Name: "remote", Kind: cluster.KindSSH, Hosts: []string{srv.Addr},
		User: srv.User, Identity: srv.ClientKeyFile, KnownHosts: srv.KnownHostsFile, Profile: "fork", LRMS: "Fork", WorkRoot: workRoot}}}
	h := newE2EPipeline(b, cfg)
	sshTrue := func() error { return exec.Command("ssh", append(args, "127.0.0.1", "true")...).Run() }
	for i := 0; i < b.N; i++ {
		start := time.Now()
		for range benchJobs {
			if err := sshTrue(); err != nil {
				b.Fatal(err)
			}
		}
		sequential := benchJobs / time.Since(start).Seconds()
		busy0, self0 := machineBusy(b), processCPU()
		eight := parallel(b, benchJobs, sshTrue)
		busy1, self1 := machineBusy(b), processCPU()
		gw := pipelineRate(b, h, benchJobs)
		busy2, self2 := machineBusy(b), processCPU()
		perJob := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 / benchJobs }
		b.Logf("CPU per job, whole machine: OpenSSH 8 at once %.1f ms, gridwire %.1f ms; of which this process and its children: %.1f ms, %.1f ms",
			perJob(busy1-busy0), perJob(busy2-busy1), perJob(self1-self0), perJob(self2-self1))
		b.ReportMetric(sequential, "openssh-cm-cmds/s")
		b.ReportMetric(eight, "openssh-cm-8-cmds/s")
		b.ReportMetric(gw, "gridwire-jobs/s")
		b.ReportMetric(gw/sequential, "ratio")
		b.ReportMetric(gw/eight, "ratio-vs-8")
	}
}

// BenchmarkE2ESlurm: /bin/true jobs end to end through gridwire and the slurm profile
// against `sbatch --wrap true` directly, both timed from the first submission until
// every job has left Slurm (gridwire: reached its terminal state).
func BenchmarkE2ESlurm(b *testing.B) {
	if os.Getenv("SLURM_CONF") == "" {
		b.Fatal("SLURM_CONF is not set: start Slurm with scripts/start-slurm.sh")
	}
	root := benchWorkRoot(b)
	h := newE2EPipeline(b, cluster.Config{Clusters: []cluster.Cluster{{Name: "hpc", Kind: cluster.KindFork, Profile: "slurm",
		LRMS: "Slurm", Queues: []string{"debug"}, WorkRoot: root}}})
	// Each iteration runs $GRIDWIRE_BENCH_PAIRS (default 1) pairs of runs, in alternating
	// order (Slurm's own state grows as it goes); the metrics are over all pairs, and each
	// pair is logged. Run with -benchtime 1x.
	pairs := 1
	if v := os.Getenv("GRIDWIRE_BENCH_PAIRS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			b.Fatalf("GRIDWIRE_BENCH_PAIRS=%q: want a positive number", v)
		}
		pairs = n
	}
	var directTime, gwTime time.Duration
	perJob := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 / slurmBenchJobs }
	for i := 0; i < b.N*pairs; i++ {
		var direct, gw float64
		var busyDirect, busyGW, selfDirect, selfGW time.Duration
		runDirect := func() {
			busy, self := machineBusy(b), processCPU()
			direct = sbatchRate(b, root, slurmBenchJobs)
			busyDirect, selfDirect = machineBusy(b)-busy, processCPU()-self
		}
		runGW := func() {
			busy, self := machineBusy(b), processCPU()
			start := time.Now()
			gw = pipelineRate(b, h, slurmBenchJobs)
			busyGW, selfGW = machineBusy(b)-busy, processCPU()-self
			b.Logf("the last job wrote its exit status %.2fs after the first submission", lastExitWrite(b, root).Sub(start).Seconds())
		}
		if i%2 == 0 {
			runDirect()
			runGW()
		} else {
			runGW()
			runDirect()
		}
		directTime += time.Duration(float64(time.Second) * slurmBenchJobs / direct)
		gwTime += time.Duration(float64(time.Second) * slurmBenchJobs / gw)
		b.Logf("pair %d: sbatch %.1f jobs/s, gridwire %.1f jobs/s, gridwire adds %.1f%%; CPU per job, whole machine: sbatch %.1f ms, gridwire %.1f ms; of which this process and its children: %.1f ms, %.1f ms",
			i+1, direct, gw, 100*(direct/gw-1), perJob(busyDirect), perJob(busyGW), perJob(selfDirect), perJob(selfGW))
	}
	b.ReportMetric(float64(b.N*pairs*slurmBenchJobs)/directTime.Seconds(), "sbatch-jobs/s")
	b.ReportMetric(float64(b.N*pairs*slurmBenchJobs)/gwTime.Seconds(), "gridwire-jobs/s")
	b.ReportMetric(100*(gwTime.Seconds()/directTime.Seconds()-1), "overhead-%")
}

// sbatchRate submits n `sbatch --wrap true` jobs, 8 submitters at a time as the
// executor's workers, and waits until squeue lists none of them.
func sbatchRate(b *testing.B, dir string, n int) float64 {
	b.Helper()
	start := time.Now()
	var mu sync.Mutex
	ids := map[string]bool{}
	parallel(b, n, func() error {
		out, err := exec.Command("sbatch", "--parsable", "--chdir="+dir, "--output=/dev/null", "--error=/dev/null", "--wrap", "true").Output()
		if err != nil {
			return err
		}
		mu.Lock()
		ids[strings.SplitN(strings.TrimSpace(string(out)), ";", 2)[0]] = true
		mu.Unlock()
		return nil
	})
	submitted := time.Since(start)
	for {
		out, err := exec.Command("squeue", "-h", "-o", "%i").Output()
		if err != nil {
			b.Fatal(err)
		}
		left := 0
		for _, id := range strings.Fields(string(out)) {
			if ids[id] {
				left++
			}
		}
		if left == 0 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	b.Logf("sbatch timeline: all submitted %.2fs, none left %.2fs", submitted.Seconds(), time.Since(start).Seconds())
	return float64(n) / time.Since(start).Seconds()
}

// machineBusy is the CPU time every core has spent not idle since boot (/proc/stat).
func machineBusy(b *testing.B) time.Duration {
	b.Helper()
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		b.Fatal(err)
	}
	line, _, _ := strings.Cut(string(data), "\n")
	f := strings.Fields(line) // cpu user nice system idle iowait irq softirq steal ...
	var busy int64
	for i, v := range f[1:] {
		n, _ := strconv.ParseInt(v, 10, 64)
		if i != 3 && i != 4 { // not idle, not iowait
			busy += n
		}
	}
	return time.Duration(busy) * time.Second / 100 // USER_HZ
}

// processCPU is the CPU time of this process and its reaped children.
func processCPU() time.Duration {
	self, children := cpuTimes()
	return self + children
}

// lastExitWrite is when the last job under root wrote its exit status: when the target
// was done, as opposed to when gridwire noticed.
func lastExitWrite(b *testing.B, root string) time.Time {
	b.Helper()
	files, err := filepath.Glob(filepath.Join(root, "*", events.ExitFile))
	if err != nil {
		b.Fatal(err)
	}
	var last time.Time
	for _, f := range files {
		if fi, err := os.Stat(f); err == nil && fi.ModTime().After(last) {
			last = fi.ModTime()
		}
	}
	return last
}

// benchWorkRoot is where jobs' working directories go: a temporary directory, under
// $GRIDWIRE_BENCH_WORK_ROOT when that is set (e.g. /dev/shm, to take the disk's cost of
// creating files out of a comparison).
func benchWorkRoot(b *testing.B) string {
	b.Helper()
	parent := os.Getenv("GRIDWIRE_BENCH_WORK_ROOT")
	if parent == "" {
		return b.TempDir()
	}
	dir, err := os.MkdirTemp(parent, "gw-bench-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// e2ePipeline runs every service on an embedded server with cfg, for a benchmark.
type e2ePipeline struct {
	conn   *nats.Conn
	store  *events.Store
	submit *ingest.Service
}

func newE2EPipeline(b *testing.B, cfg cluster.Config) *e2ePipeline {
	b.Helper()
	dir := b.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	bs, err := bus.Open(ctx, bus.Config{DataDir: filepath.Join(dir, "nats")})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := events.Provision(ctx, bs.JS, events.StreamOptions{}); err != nil {
		b.Fatal(err)
	}
	sys := &system{bus: bs, cfg: cfg, data: dir, log: slog.New(slog.DiscardHandler), host: "bench", allowRootJobs: true}
	g, gctx := errgroup.WithContext(ctx)
	if err := sys.start(gctx, g, allServices, nil); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		cancel()
		g.Wait()
		sys.close()
	})
	p := &e2ePipeline{conn: bs.Conn, store: events.NewStore(bs.Conn, bs.JS, "bench")}
	if p.submit, err = ingest.New(ingest.Config{}, ingest.Deps{Store: p.store}); err != nil {
		b.Fatal(err)
	}
	return p
}
