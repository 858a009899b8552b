package executor

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/pkg/benchrun"
	"github.com/gridwire/gridwire/pkg/cluster"
	"github.com/gridwire/gridwire/pkg/sshx/sshtest"
	"github.com/gridwire/gridwire/pkg/target"
)

// BenchmarkExecutorsScale measures how start throughput grows with executor processes
// sharing one cluster's durable consumer (each here a Run with its own connection and
// 4 workers), when every START takes 200 ms (a slow submission). Reported: jobs/s.
func BenchmarkExecutorsScale(b *testing.B) {
	for _, n := range []int{1, 2, 3} {
		b.Run(fmt.Sprintf("executors=%d", n), func(b *testing.B) {
			const jobs = 96
			for i := 0; i < b.N; i++ {
				elapsed := scaleRun(b, n, jobs)
				b.ReportMetric(float64(jobs)/elapsed.Seconds(), "jobs/s")
			}
		})
	}
}

func scaleRun(b *testing.B, executors, jobs int) time.Duration {
	b.StopTimer()
	e := newEnv(b)
	cl := cluster.Cluster{Name: "slow", Kind: cluster.KindFork, Profile: "slurm", LRMS: "Slurm", AllowRoot: true}
	root := b.TempDir()
	ids := make([]string, jobs)
	for j := range ids {
		wd := filepath.Join(root, events.NewID())
		inc := forkIncarnation("slow", wd, "true")
		inc.Scripts[events.ScriptStart] = events.Script{Body: "sleep 0.2\n" + forkStart}
		ids[j] = e.queue(inc)
	}
	b.StartTimer()
	start := time.Now()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for x := 0; x < executors; x++ {
		nc, err := e.bus.Connect(fmt.Sprintf("exec-%d", x))
		if err != nil {
			b.Fatal(err)
		}
		store := events.NewStore(nc, e.bus.JS, "bench")
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer nc.Close()
			tg := &ScriptTarget{Cluster: "slow", Shells: []Shell{target.Local{}}}
			Run(ctx, Config{Cluster: cl, ID: fmt.Sprint(x), Workers: 4}, Deps{JS: e.bus.JS, Store: store, Target: tg,
				Logger: slog.New(slog.DiscardHandler)})
		}()
	}
	for _, id := range ids {
		e.waitFor(id, "started", func(s events.State) bool { return s.NativeID != "" })
	}
	elapsed := time.Since(start)
	b.StopTimer()
	cancel()
	wg.Wait()
	return elapsed
}

// BenchmarkSSHStart measures starts through the fork profile's START over one pooled
// connection to an in-process SSH server, 8 and 32 at a time (the executor's workers:
// 8 by default, 32 in the consumer under load). Reported: starts/s, until the last
// start returned (the jobs themselves are waited for afterwards, untimed).
func BenchmarkSSHStart(b *testing.B) {
	for _, workers := range []int{8, 32} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) { sshStarts(b, workers) })
	}
}

func sshStarts(b *testing.B, workers int) {
	srv := sshtest.NewServer(b)
	user := os.Getenv("USER")
	if user == "" {
		user = "gridwire"
	}
	cl := cluster.Cluster{Name: "remote", Kind: cluster.KindSSH, Hosts: []string{srv.Addr}, User: user,
		Identity: srv.ClientKeyFile, KnownHosts: srv.KnownHostsFile, Profile: "fork", LRMS: "Fork"}
	tg, closeFn, err := NewTarget(cl, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer closeFn()
	root := b.TempDir()
	wds := make([]string, b.N)
	b.ResetTimer()
	start := time.Now()
	sem := make(chan struct{}, workers)
	var wg sync.WaitGroup
	for i := 0; i < b.N; i++ {
		wds[i] = filepath.Join(root, events.NewID())
		st := events.State{JobID: filepath.Base(wds[i]), Incarnation: ptr(forkIncarnation("remote", wds[i], "true"))}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if _, err := tg.Start(context.Background(), st); err != nil {
				b.Error(err)
			}
		}()
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "starts/s")
	b.StopTimer()
	for _, wd := range wds {
		waitFile(b, filepath.Join(wd, events.ExitFile))
	}
}

// BenchmarkForkStart compares, in one run, the fork target's start rate (start lock,
// detached session, then the job's own shell runs its JOB script and writes its files)
// with raw rates of the same machine: spawning and reaping /bin/true, and spawning the
// same JOB script under /bin/sh without gridwire; all 8 at a time (the executor's
// workers). The fork rate is bounded by the jobs it starts, which share the CPU.
func BenchmarkForkStart(b *testing.B) {
	root := b.TempDir()
	tg := &ForkTarget{Cluster: "local", Logger: slog.New(slog.DiscardHandler)}
	const n = 1000
	for i := 0; i < b.N; i++ {
		raw := concurrently(b, n, func() error { return exec.Command("/bin/true").Run() })
		rawJob := concurrently(b, n, func() error {
			wd := filepath.Join(root, events.NewID())
			if err := os.MkdirAll(filepath.Join(wd, events.ControlDir), 0o700); err != nil {
				return err
			}
			cmd := exec.Command("/bin/sh", "-c", jobScript(wd, "true"))
			cmd.Dir = wd
			return cmd.Run()
		})
		fork := concurrently(b, n, func() error {
			wd := filepath.Join(root, events.NewID())
			_, err := tg.Start(context.Background(), events.State{JobID: filepath.Base(wd), Incarnation: ptr(forkIncarnation("local", wd, "true"))})
			return err
		})
		b.ReportMetric(raw, "raw-spawns/s")
		b.ReportMetric(rawJob, "raw-jobs/s")
		b.ReportMetric(fork, "fork-starts/s")
		b.ReportMetric(fork/raw, "ratio-spawn")
		b.ReportMetric(fork/rawJob, "ratio-job")
	}
}

// concurrently runs fn n times, 8 at a time, and returns runs/s.
func concurrently(b *testing.B, n int, fn func() error) float64 {
	return concurrentlyN(b, n, 8, fn)
}

// concurrentlyN runs fn n times, workers at a time, and returns runs/s.
func concurrentlyN(b *testing.B, n, workers int, fn func() error) float64 {
	return benchrun.Concurrently(b, n, workers, fn)
}

// BenchmarkScriptStarts measures what starting costs on a ScriptTarget when START only
// prints an ID (a batch system's submit, without the batch system): over this host's
// shell and over one pooled connection to the in-process SSH server, 8 and 32 at a time.
// The working directories exist beforehand, as the stager leaves them. Reported:
// starts/s, and CPU per start of this process and every process it waited for (the
// shells, their subshells, the in-process server's sessions), which the machine's
// other load changes far less than the rate.
func BenchmarkScriptStarts(b *testing.B) {
	for _, shell := range []string{"local", "ssh"} {
		for _, workers := range []int{8, 32} {
			b.Run(fmt.Sprintf("shell=%s/workers=%d", shell, workers), func(b *testing.B) {
				tg := scriptStartsTarget(b, shell)
				sh := &countingShell{Shell: tg.Shells[0]}
				tg.Shells[0] = sh
				const n = 1000
				for i := 0; i < b.N; i++ {
					sh.feeds.Store(0)
					rate, cpu := scriptStarts(b, tg, n, workers)
					b.ReportMetric(rate, "starts/s")
					b.ReportMetric(float64(cpu.Microseconds())/1000/n, "cpu-ms/start")
					b.ReportMetric(float64(n)/float64(sh.feeds.Load()), "starts/script")
				}
			})
		}
	}
}

func scriptStartsTarget(b *testing.B, shell string) *ScriptTarget {
	if shell == "local" {
		return &ScriptTarget{Cluster: "hpc", Shells: []Shell{target.Local{}}, Batch: true}
	}
	srv := sshtest.NewServer(b)
	user := os.Getenv("USER")
	if user == "" {
		user = "gridwire"
	}
	tg, closeFn, err := NewTarget(cluster.Cluster{Name: "remote", Kind: cluster.KindSSH, Hosts: []string{srv.Addr}, User: user,
		Identity: srv.ClientKeyFile, KnownHosts: srv.KnownHostsFile, Profile: "slurm", LRMS: "Slurm"}, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(closeFn)
	return tg.(*ScriptTarget)
}

// scriptStarts starts n jobs, workers at a time, and returns starts/s and the CPU spent.
func scriptStarts(b *testing.B, tg Target, n, workers int) (float64, time.Duration) {
	b.StopTimer()
	root := b.TempDir()
	sts := make([]events.State, n)
	for i := range sts {
		wd := filepath.Join(root, events.NewID())
		if err := os.MkdirAll(filepath.Join(wd, events.ControlDir), 0o700); err != nil {
			b.Fatal(err)
		}
		inc := batchIncarnation(wd)
		inc.Scripts[events.ScriptStart] = events.Script{Body: "echo 4242\n"}
		sts[i] = events.State{JobID: filepath.Base(wd), Incarnation: &inc}
	}
	b.StartTimer()
	cpu := cpuTime()
	next := make(chan events.State, n)
	for _, st := range sts {
		next <- st
	}
	close(next)
	rate := concurrentlyN(b, n, workers, func() error {
		_, err := tg.Start(context.Background(), <-next)
		return err
	})
	return rate, cpuTime() - cpu
}

// cpuTime is the CPU time of this process and of the children it has waited for.
func cpuTime() time.Duration {
	var t time.Duration
	for _, who := range []int{syscall.RUSAGE_SELF, syscall.RUSAGE_CHILDREN} {
		var ru syscall.Rusage
		if err := syscall.Getrusage(who, &ru); err == nil {
			t += time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		}
	}
	return t
}
