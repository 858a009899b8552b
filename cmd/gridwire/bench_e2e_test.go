//go:build e2e

package main

import (
	"context"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/pkg/bus"
	"github.com/gridwire/gridwire/pkg/cluster"
	"github.com/gridwire/gridwire/pkg/sshx/sshtest"
	"github.com/gridwire/gridwire/services/ingest"
	"golang.org/x/sync/errgroup"
)

// Benchmarks of whole runs against real targets, each compared with the target's own
// tool in the same run. Run with -benchtime 1x (see services/executor/BENCHMARKS.md).

const benchJobs = 300

// slurmBenchJobs is larger: at Slurm's pace the last poll's delay would weigh on a short run.
const slurmBenchJobs = 1000

// pipelineRate submits n /bin/true jobs and returns jobs/s from the first submission
// to the last terminal state.
func pipelineRate(b *testing.B, h *e2ePipeline, n int) float64 {
	b.Helper()
	doc := []byte(`{"version": 3, "executable": "/bin/true"}`)
	start := time.Now()
	ids := make([]string, 0, n)
	for i := 0; i < n; i++ {
		acc, err := h.submit.Submit(context.Background(), ingest.Submission{File: "bench.json", Data: doc, Submitter: "bench"})
		if err != nil {
			b.Fatal(err)
		}
		ids = append(ids, acc.Jobs[0])
	}
	open := ids
	for len(open) > 0 {
		time.Sleep(20 * time.Millisecond)
		var still []string
		for _, id := range open {
			if st, err := h.store.State(context.Background(), id); err != nil || !st.Status.Terminal() {
				still = append(still, id)
			}
		}
		open = still
	}
	return float64(n) / time.Since(start).Seconds()
}

// parallel runs fn n times, 8 at a time, and returns runs/s.
func parallel(b *testing.B, n int, fn func() error) float64 {
	b.Helper()
	start := time.Now()
	sem := make(chan struct{}, 8)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := fn(); err != nil {
				b.Error(err)
			}
		}()
	}
	wg.Wait()
	return float64(n) / time.Since(start).Seconds()
}

// BenchmarkE2ESSHCluster: /bin/true jobs end to end on an ssh cluster (a real sshd on
// loopback, the fork profile) against OpenSSH running `true` over a ControlMaster
// connection, 8 at a time.
func BenchmarkE2ESSHCluster(b *testing.B) {
	srv := sshtest.StartOpenSSH(b)
	control := filepath.Join(srv.Dir, "..", "cm-%C")
	args := append(srv.SSHArgs(), "-o", "ControlMaster=auto", "-o", "ControlPath="+control, "-o", "ControlPersist=120")
	if out, err := exec.Command("ssh", append(args, "127.0.0.1", "true")...).CombinedOutput(); err != nil {
		b.Fatalf("ssh: %v %s", err, out)
	}
	defer exec.Command("ssh", append(args, "-O", "exit", "127.0.0.1")...).Run()
	cfg := cluster.Config{Clusters: []cluster.Cluster{{Name: "remote", Kind: cluster.KindSSH, Hosts: []string{srv.Addr},
		User: srv.User, Identity: srv.ClientKeyFile, KnownHosts: srv.KnownHostsFile, Profile: "fork", LRMS: "Fork", WorkRoot: srv.Dir}}}
	h := newE2EPipeline(b, cfg)
	for i := 0; i < b.N; i++ {
		openssh := parallel(b, benchJobs, func() error {
			return exec.Command("ssh", append(args, "127.0.0.1", "true")...).Run()
		})
		gw := pipelineRate(b, h, benchJobs)
		b.ReportMetric(openssh, "openssh-cm-cmds/s")
		b.ReportMetric(gw, "gridwire-jobs/s")
		b.ReportMetric(gw/openssh, "ratio")
	}
}

// BenchmarkE2ESlurm: /bin/true jobs end to end through gridwire and the slurm profile
// against `sbatch --wrap true` directly, both timed from the first submission until
// every job has left Slurm (gridwire: reached its terminal state).
func BenchmarkE2ESlurm(b *testing.B) {
	if os.Getenv("SLURM_CONF") == "" {
		b.Fatal("SLURM_CONF is not set: start Slurm with scripts/start-slurm.sh")
	}
	root := b.TempDir()
	h := newE2EPipeline(b, cluster.Config{Clusters: []cluster.Cluster{{Name: "hpc", Kind: cluster.KindFork, Profile: "slurm",
		LRMS: "Slurm", Queues: []string{"debug"}, WorkRoot: root}}})
	for i := 0; i < b.N; i++ {
		direct := sbatchRate(b, root, slurmBenchJobs)
		gw := pipelineRate(b, h, slurmBenchJobs)
		b.ReportMetric(direct, "sbatch-jobs/s")
		b.ReportMetric(gw, "gridwire-jobs/s")
		b.ReportMetric(100*(direct/gw-1), "overhead-%")
	}
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
	return float64(n) / time.Since(start).Seconds()
}

// e2ePipeline runs every service on an embedded server with cfg, for a benchmark.
type e2ePipeline struct {
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
	sys := &system{bus: bs, cfg: cfg, data: dir, log: slog.New(slog.DiscardHandler), host: "bench"}
	g, gctx := errgroup.WithContext(ctx)
	if err := sys.start(gctx, g, allServices, nil); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		cancel()
		g.Wait()
		sys.close()
	})
	p := &e2ePipeline{store: events.NewStore(bs.Conn, bs.JS, "bench")}
	if p.submit, err = ingest.New(ingest.Config{}, ingest.Deps{Store: p.store}); err != nil {
		b.Fatal(err)
	}
	return p
}
