package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/pkg/cluster"
	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"
)

// The two rows of `gridwire bench` measured on real targets, each beside the target's own
// tool in the same run: /bin/true jobs through gridwire's slurm profile against `sbatch
// --wrap true` waited to completion, and jobs on an ssh cluster against OpenSSH running
// `true` over a ControlMaster connection, one command at a time. The end-to-end
// benchmarks (BenchmarkE2ESlurm, BenchmarkE2ESSHCluster) run this same code against the
// suite's Slurm and sshd.

// targetOpts are the flags of the target rows; a row whose target is not named is
// reported as skipped, with the flag that measures it.
type targetOpts struct {
	only          bool
	slurm         bool
	slurmJobs     int
	slurmPairs    int
	slurmQueue    string
	ssh           string // host[:port]
	sshUser       string
	sshIdentity   string
	sshKnownHosts string
	sshWorkRoot   string
	sshJobs       int
}

func (t *targetOpts) flags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.BoolVar(&t.only, "targets-only", false, "measure only the rows of the targets named by --slurm and --ssh, not the fork pipeline")
	f.BoolVar(&t.slurm, "slurm", false, "measure Slurm through gridwire against `sbatch --wrap true` (sbatch and squeue on PATH, SLURM_CONF as scripts/start-slurm.sh sets it)")
	f.IntVar(&t.slurmJobs, "slurm-jobs", 1000, "/bin/true jobs on each side of a Slurm pair")
	f.IntVar(&t.slurmPairs, "slurm-pairs", 1, "Slurm pairs (sbatch, gridwire), in alternating order; the row is over all of them")
	f.StringVar(&t.slurmQueue, "slurm-queue", "", "Slurm partition of both sides (default: Slurm's default partition)")
	f.StringVar(&t.ssh, "ssh", "", "measure an ssh cluster on HOST[:PORT] against OpenSSH over a ControlMaster connection")
	f.StringVar(&t.sshUser, "ssh-user", "", "login on the --ssh host (default: ssh's)")
	f.StringVar(&t.sshIdentity, "ssh-identity", "", "private key file for the --ssh host (default: ssh-agent, as an ssh cluster)")
	f.StringVar(&t.sshKnownHosts, "ssh-known-hosts", "", "known_hosts file holding the --ssh host's key (required with --ssh)")
	f.StringVar(&t.sshWorkRoot, "ssh-work-root", "", "job working directories on the --ssh host (default: the fork profile's)")
	f.IntVar(&t.sshJobs, "ssh-jobs", 300, "/bin/true jobs on each side of the ssh row")
}

// check refuses flags that cannot measure anything, before any work is done.
func (t *targetOpts) check() error {
	if t.only && !t.slurm && t.ssh == "" {
		return errors.New("--targets-only: name a target with --slurm or --ssh")
	}
	if t.slurm {
		if t.slurmJobs < 1 || t.slurmPairs < 1 {
			return fmt.Errorf("--slurm-jobs %d, --slurm-pairs %d: both must be at least 1", t.slurmJobs, t.slurmPairs)
		}
		for _, tool := range []string{"sbatch", "squeue"} {
			if _, err := exec.LookPath(tool); err != nil {
				return fmt.Errorf("--slurm: %w", err)
			}
		}
	}
	if t.ssh == "" {
		return nil
	}
	if _, _, err := t.sshHostPort(); err != nil {
		return err
	}
	if t.sshKnownHosts == "" {
		return fmt.Errorf("--ssh %s: --ssh-known-hosts is required (an ssh cluster checks the host's key)", t.ssh)
	}
	if t.sshJobs < 1 {
		return fmt.Errorf("--ssh-jobs %d: must be at least 1", t.sshJobs)
	}
	return nil
}

// sshHostPort splits --ssh into host and port ("" when none is given). A host that
// begins with "-" would read as an option of ssh, and is refused.
func (t *targetOpts) sshHostPort() (host, port string, err error) {
	host = t.ssh
	if h, p, err := net.SplitHostPort(t.ssh); err == nil {
		if _, err := strconv.ParseUint(p, 10, 16); err != nil {
			return "", "", fmt.Errorf("--ssh %q: port %q is not a port number", t.ssh, p)
		}
		host, port = h, p
	}
	if host == "" || strings.HasPrefix(host, "-") || strings.ContainsAny(host, " \t\n@") {
		return "", "", fmt.Errorf("--ssh %q: want HOST or HOST:PORT (the login goes in --ssh-user)", t.ssh)
	}
	return host, port, nil
}

// slurmRow is Slurm through gridwire against `sbatch --wrap true`, both timed from the
// first submission until every job has left Slurm (gridwire: reached its terminal
// state). CPU is per job, in milliseconds: the whole machine's (/proc/stat) and that of
// this process and its reaped children.
type slurmRow struct {
	Jobs            int      `json:"jobs"`
	Pairs           int      `json:"pairs"`
	SbatchPerSec    float64  `json:"sbatch_jobs_per_sec"`
	GridwirePerSec  float64  `json:"gridwire_jobs_per_sec"`
	OverheadPercent float64  `json:"overhead_percent"`
	SbatchCPU       cpuShare `json:"sbatch_cpu_ms"`
	GridwireCPU     cpuShare `json:"gridwire_cpu_ms"`
	Notes           []string `json:"notes,omitempty"`
}

// sshRow is jobs on an ssh cluster (fork profile) against OpenSSH running `true` over a
// ControlMaster connection, one command at a time (the goal's yardstick) and 8 at a time
// (the CPU comparison).
type sshRow struct {
	Jobs           int      `json:"jobs"`
	OpenSSHPerSec  float64  `json:"openssh_cm_per_sec"`
	OpenSSH8PerSec float64  `json:"openssh_cm_8_per_sec"`
	GridwirePerSec float64  `json:"gridwire_jobs_per_sec"`
	Ratio          float64  `json:"ratio"`
	OpenSSH8CPU    cpuShare `json:"openssh_cm_8_cpu_ms"`
	GridwireCPU    cpuShare `json:"gridwire_cpu_ms"`
	Notes          []string `json:"notes,omitempty"`
}

// cpuShare is CPU per job in milliseconds: the machine's, this process's with its
// reaped children, and (Slurm rows) that of Slurm's daemons (slurmctld, slurmscriptd,
// slurmd): the two shares the machine's other load does not move. A job's slurmstepd
// is left to init by slurmd, so its CPU is in the machine's share alone.
type cpuShare struct {
	Machine float64 `json:"machine"`
	Process float64 `json:"process"`
	Slurm   float64 `json:"slurm,omitempty"`
}

// benchTargets measures the rows whose targets the flags name, and reports the others as
// skipped with the flag that measures them.
func benchTargets(ctx context.Context, e *env, o *benchOpts, r *benchResult) error {
	var err error
	if o.targets.slurm {
		if r.Slurm, err = benchSlurm(ctx, e, o); err != nil {
			return fmt.Errorf("bench --slurm: %w", err)
		}
	} else {
		r.Skipped = append(r.Skipped, "Slurm e2e vs sbatch --wrap: --slurm measures it (sbatch on PATH, SLURM_CONF set)")
	}
	if o.targets.ssh != "" {
		if r.SSH, err = benchSSH(ctx, e, o); err != nil {
			return fmt.Errorf("bench --ssh: %w", err)
		}
	} else {
		r.Skipped = append(r.Skipped, "SSH cluster vs ControlMaster: --ssh HOST[:PORT] --ssh-known-hosts FILE measures it")
	}
	return nil
}

// runTargets is --targets-only: the target rows alone.
func runTargets(ctx context.Context, e *env, o *benchOpts) (benchResult, error) {
	r := benchResult{CPUs: runtime.NumCPU(), Load: loadAvg()}
	if err := benchTargets(ctx, e, o, &r); err != nil {
		return r, err
	}
	r.Load += " -> " + loadAvg()
	return r, nil
}

// printTargets prints the target rows through row (figure, gridwire, yardstick, goal),
// each followed by its CPU per job and its notes.
func printTargets(w io.Writer, row func(fig, val, yard, goal string), s *slurmRow, h *sshRow) {
	if s != nil {
		row(fmt.Sprintf("Slurm e2e, %d jobs x %d through gridwire", s.Jobs, s.Pairs),
			fmt.Sprintf("%.1f jobs/s = %+.1f%%", s.GridwirePerSec, s.OverheadPercent),
			fmt.Sprintf("sbatch --wrap true %.1f jobs/s", s.SbatchPerSec), "<= +5% "+met(s.OverheadPercent <= 5))
		fmt.Fprintf(w, "  CPU per job, machine (this process + children; Slurm's daemons): sbatch %.1f (%.1f; %.1f) ms, gridwire %.1f (%.1f; %.1f) ms\n",
			s.SbatchCPU.Machine, s.SbatchCPU.Process, s.SbatchCPU.Slurm, s.GridwireCPU.Machine, s.GridwireCPU.Process, s.GridwireCPU.Slurm)
		printNotes(w, s.Notes)
	}
	if h != nil {
		row(fmt.Sprintf("SSH cluster, %d fork jobs", h.Jobs), fmt.Sprintf("%.1f jobs/s = %.2fx OpenSSH", h.GridwirePerSec, h.Ratio),
			fmt.Sprintf("OpenSSH CM 1 at a time %.1f/s", h.OpenSSHPerSec), ">= 3x "+met(h.Ratio >= 3))
		fmt.Fprintf(w, "  OpenSSH CM 8 at a time %.1f/s; CPU per job, machine (this process + children): OpenSSH 8 at a time %.1f (%.1f) ms, gridwire %.1f (%.1f) ms\n",
			h.OpenSSH8PerSec, h.OpenSSH8CPU.Machine, h.OpenSSH8CPU.Process, h.GridwireCPU.Machine, h.GridwireCPU.Process)
		printNotes(w, h.Notes)
	}
}

func printNotes(w io.Writer, notes []string) {
	for _, n := range notes {
		fmt.Fprintf(w, "  %s\n", n)
	}
}

// benchSlurm runs the Slurm pairs: each side slurmJobs /bin/true jobs, the side that goes
// first alternating (Slurm's own state grows as it goes); the rates are over all pairs.
func benchSlurm(ctx context.Context, e *env, o *benchOpts) (*slurmRow, error) {
	t := o.targets
	root := o.workRoot
	if root == "" {
		root = filepath.Join(o.data, "slurm", "jobs")
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, err
	}
	cl := cluster.Cluster{Name: "bench-slurm", Kind: cluster.KindFork, Profile: "slurm", LRMS: "Slurm", WorkRoot: root}
	if t.slurmQueue != "" {
		cl.Queues = []string{t.slurmQueue}
	}
	sys, err := targetSystem(ctx, e, o, filepath.Join(o.data, "slurm"), cl)
	if err != nil {
		return nil, err
	}
	defer sys.stop()
	row := &slurmRow{Jobs: t.slurmJobs, Pairs: t.slurmPairs}
	var direct, gw side
	for i := range t.slurmPairs {
		var d, g side
		sbatchSide := func() error {
			return d.measure(func() (string, error) { return sbatchRun(ctx, root, t.slurmJobs, t.slurmQueue) })
		}
		gwSide := func() error {
			return g.measure(func() (string, error) {
				start := time.Now()
				note, err := targetPipeline(sys, t.slurmJobs)
				return fmt.Sprintf("%s; the last job wrote its exit status %.2fs after the first submission", note, lastExitWrite(root).Sub(start).Seconds()), err
			})
		}
		order := []func() error{sbatchSide, gwSide}
		if i%2 == 1 {
			order[0], order[1] = order[1], order[0]
		}
		for _, run := range order {
			if err := run(); err != nil {
				return nil, err
			}
		}
		row.Notes = append(row.Notes, fmt.Sprintf("pair %d: sbatch %.1f jobs/s, gridwire %.1f jobs/s, gridwire adds %.1f%%",
			i+1, d.rate(t.slurmJobs), g.rate(t.slurmJobs), 100*(g.wall.Seconds()/d.wall.Seconds()-1)), "  sbatch: "+d.note, "  gridwire: "+g.note)
		direct.add(d)
		gw.add(g)
	}
	n := t.slurmJobs * t.slurmPairs
	row.SbatchPerSec, row.GridwirePerSec = direct.rate(n), gw.rate(n)
	row.OverheadPercent = 100 * (gw.wall.Seconds()/direct.wall.Seconds() - 1)
	row.SbatchCPU, row.GridwireCPU = direct.cpu(n), gw.cpu(n)
	return row, nil
}

// benchSSH measures OpenSSH over a ControlMaster connection, one command at a time and 8
// at a time, then the same number of jobs through gridwire on an ssh cluster of the host.
func benchSSH(ctx context.Context, e *env, o *benchOpts) (*sshRow, error) {
	t := o.targets
	sshTrue, closeMaster, err := controlMaster(ctx, t)
	if err != nil {
		return nil, err
	}
	defer closeMaster()
	cl := cluster.Cluster{Name: "bench-ssh", Kind: cluster.KindSSH, Hosts: []string{t.ssh}, User: t.sshUser,
		Identity: t.sshIdentity, KnownHosts: t.sshKnownHosts, Profile: "fork", LRMS: "Fork", WorkRoot: t.sshWorkRoot}
	sys, err := targetSystem(ctx, e, o, filepath.Join(o.data, "ssh"), cl)
	if err != nil {
		return nil, err
	}
	defer sys.stop()
	row := &sshRow{Jobs: t.sshJobs}
	var one, eight, gw side
	if err := one.measure(func() (string, error) { return "", concurrently(ctx, t.sshJobs, 1, sshTrue) }); err != nil {
		return nil, err
	}
	if err := eight.measure(func() (string, error) { return "", concurrently(ctx, t.sshJobs, 8, sshTrue) }); err != nil {
		return nil, err
	}
	if err := gw.measure(func() (string, error) { return targetPipeline(sys, t.sshJobs) }); err != nil {
		return nil, err
	}
	row.OpenSSHPerSec, row.OpenSSH8PerSec, row.GridwirePerSec = one.rate(t.sshJobs), eight.rate(t.sshJobs), gw.rate(t.sshJobs)
	row.Ratio = row.GridwirePerSec / row.OpenSSHPerSec
	row.OpenSSH8CPU, row.GridwireCPU = eight.cpu(t.sshJobs), gw.cpu(t.sshJobs)
	row.Notes = []string{"gridwire: " + gw.note}
	return row, nil
}

// side is what one side of a comparison took: wall time, the machine's CPU, this
// process's with its children, and a note on where the time went.
type side struct {
	wall, machine, process, slurm time.Duration
	note                          string
}

func (s *side) measure(fn func() (string, error)) error {
	busy0, err := machineBusy()
	if err != nil {
		return err
	}
	self0, slurm0, start := processCPU(), slurmCPU(), time.Now()
	if s.note, err = fn(); err != nil {
		return err
	}
	s.wall, s.process, s.slurm = time.Since(start), processCPU()-self0, slurmCPU()-slurm0
	busy1, err := machineBusy()
	s.machine = busy1 - busy0
	return err
}

func (s *side) add(o side) {
	s.wall, s.machine, s.process, s.slurm = s.wall+o.wall, s.machine+o.machine, s.process+o.process, s.slurm+o.slurm
}

func (s side) rate(n int) float64 { return float64(n) / s.wall.Seconds() }

func (s side) cpu(n int) cpuShare {
	return cpuShare{Machine: ms(s.machine) / float64(n), Process: ms(s.process) / float64(n), Slurm: ms(s.slurm) / float64(n)}
}

// slurmCPU is the CPU time of this machine's Slurm daemons (slurmctld, slurmscriptd,
// slurmd) with the children they have reaped, from /proc: 0 where there are none.
func slurmCPU() time.Duration {
	dirs, _ := os.ReadDir("/proc")
	var ticks int64
	for _, d := range dirs {
		if d.Name()[0] < '0' || d.Name()[0] > '9' {
			continue
		}
		b, err := os.ReadFile("/proc/" + d.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid ... : fields after the comm's closing parenthesis
		i := strings.LastIndexByte(string(b), ')')
		_, comm, _ := strings.Cut(string(b[:max(i, 0)]), "(")
		if comm != "slurmctld" && comm != "slurmscriptd" && comm != "slurmd" {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) < 15 {
			continue
		}
		for _, v := range f[11:15] { // utime stime cutime cstime
			n, _ := strconv.ParseInt(v, 10, 64)
			ticks += n
		}
	}
	return time.Duration(ticks) * time.Second / 100 // USER_HZ
}

// targetSystem runs every service on an embedded server in dir with cl as its only
// cluster; stop ends them and closes the system.
func targetSystem(ctx context.Context, e *env, o *benchOpts, dir string, cl cluster.Cluster) (*benchServices, error) {
	if err := (cluster.Config{Clusters: []cluster.Cluster{cl}}).Validate(); err != nil {
		return nil, err
	}
	return benchSystemWith(ctx, e, o, dir, allServices, []cluster.Cluster{cl})
}

// targetPipeline submits n /bin/true jobs from 16 goroutines, as the fork pipeline row
// does (one at a time, durable submission itself bounded the row on a loaded machine),
// and waits until each has reached its terminal state, seen on the bus as it is stored
// (no polling: a poll of every open job would load the machine the target shares). The
// note is the run's timeline.
func targetPipeline(sys *benchServices, n int) (string, error) {
	ends := newEndWatch()
	sub, err := sys.bus.Conn.Subscribe(events.SubjectEvent, ends.observe)
	if err != nil {
		return "", err
	}
	defer sub.Unsubscribe()
	_ = sub.SetPendingLimits(-1, -1)
	// The server has the subscription before the first job is submitted (from ingest's own
	// connection), so no job's first event goes unseen.
	if err := sys.bus.Conn.Flush(); err != nil {
		return "", err
	}
	start := time.Now()
	if _, _, err := submitManyIDs(sys.ctx, sys.ingest, n, 16); err != nil {
		return "", sys.why(err)
	}
	if err := ends.waitCount(sys.ctx, n, 10*time.Minute); err != nil {
		return "", sys.why(err)
	}
	if f := ends.failures(); f > 0 {
		return "", fmt.Errorf("%d of %d jobs did not succeed", f, n)
	}
	return "timeline " + ends.timeline(start), nil
}

// sbatchRun submits n `sbatch --wrap true` jobs, 8 submitters at a time as the
// executor's workers, and waits until squeue lists none of them. The note is when the
// last was submitted and when none was left.
func sbatchRun(ctx context.Context, dir string, n int, queue string) (string, error) {
	start := time.Now()
	var mu sync.Mutex
	ids := map[string]bool{}
	args := []string{"--parsable", "--chdir=" + dir, "--output=/dev/null", "--error=/dev/null"}
	if queue != "" {
		args = append(args, "--partition="+queue)
	}
	err := concurrently(ctx, n, 8, func() error {
		out, err := exec.CommandContext(ctx, "sbatch", append(args, "--wrap", "true")...).Output()
		if err != nil {
			return fmt.Errorf("sbatch: %w%s", err, stderrOf(err))
		}
		mu.Lock()
		ids[strings.SplitN(strings.TrimSpace(string(out)), ";", 2)[0]] = true
		mu.Unlock()
		return nil
	})
	if err != nil {
		return "", err
	}
	submitted := time.Since(start)
	if err := waitSqueue(ctx, ids); err != nil {
		return "", err
	}
	return fmt.Sprintf("all submitted %.2fs, none left %.2fs", submitted.Seconds(), time.Since(start).Seconds()), nil
}

// waitSqueue polls squeue every 20 ms until it lists none of ids.
func waitSqueue(ctx context.Context, ids map[string]bool) error {
	for {
		out, err := exec.CommandContext(ctx, "squeue", "-h", "-o", "%i").Output()
		if err != nil {
			return fmt.Errorf("squeue: %w%s", err, stderrOf(err))
		}
		left := 0
		for _, id := range strings.Fields(string(out)) {
			if ids[id] {
				left++
			}
		}
		if left == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// controlMaster opens an OpenSSH ControlMaster connection to the --ssh host (the first
// `true` over it, not timed) and returns a function that runs `true` over it, and one
// that ends the master and removes its socket's directory.
func controlMaster(ctx context.Context, t targetOpts) (func() error, func(), error) {
	host, port, err := t.sshHostPort()
	if err != nil {
		return nil, nil, err
	}
	dir, err := os.MkdirTemp("", "gw-cm-")
	if err != nil {
		return nil, nil, err
	}
	args := []string{"-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes", "-o", "UserKnownHostsFile=" + t.sshKnownHosts,
		"-o", "ControlMaster=auto", "-o", "ControlPath=" + filepath.Join(dir, "%C"), "-o", "ControlPersist=120"}
	if t.sshIdentity != "" {
		args = append(args, "-i", t.sshIdentity, "-o", "IdentitiesOnly=yes")
	}
	if t.sshUser != "" {
		args = append(args, "-o", "User="+t.sshUser)
	}
	if port != "" {
		args = append(args, "-o", "Port="+port)
	}
	closeMaster := func() {
		_ = exec.Command("ssh", append(args, "-O", "exit", "--", host)...).Run()
		os.RemoveAll(dir)
	}
	sshTrue := func() error {
		if out, err := exec.CommandContext(ctx, "ssh", append(args, "--", host, "true")...).CombinedOutput(); err != nil {
			return fmt.Errorf("ssh %s true: %w: %s", t.ssh, err, strings.TrimSpace(string(out)))
		}
		return nil
	}
	if err := sshTrue(); err != nil {
		closeMaster()
		return nil, nil, err
	}
	return sshTrue, closeMaster, nil
}

// concurrently runs fn n times, workers at a time; the first error stops it.
func concurrently(ctx context.Context, n, workers int, fn func() error) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(workers)
	for range n {
		if gctx.Err() != nil {
			break
		}
		g.Go(fn)
	}
	return g.Wait()
}

func stderrOf(err error) string {
	var ee *exec.ExitError
	if errors.As(err, &ee) && len(ee.Stderr) > 0 {
		return ": " + strings.TrimSpace(string(ee.Stderr))
	}
	return ""
}

// machineBusy is the CPU time every core has spent not idle since boot (/proc/stat).
func machineBusy() (time.Duration, error) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, err
	}
	line, _, _ := strings.Cut(string(data), "\n")
	f := strings.Fields(line) // cpu user nice system idle iowait irq softirq steal ...
	if len(f) < 5 || f[0] != "cpu" {
		return 0, fmt.Errorf("/proc/stat: first line %q is not the cpu line", line)
	}
	var busy int64
	for i, v := range f[1:] {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/stat: cpu field %d: %w", i+1, err)
		}
		if i != 3 && i != 4 { // not idle, not iowait
			busy += n
		}
	}
	return time.Duration(busy) * time.Second / 100, nil // USER_HZ
}

// processCPU is the CPU time of this process and its reaped children.
func processCPU() time.Duration {
	self, children := cpuTimes()
	return self + children
}

// lastExitWrite is when the last job under root wrote its exit status: when the target
// was done, as opposed to when gridwire noticed.
func lastExitWrite(root string) time.Time {
	files, _ := filepath.Glob(filepath.Join(root, "*", events.ExitFile))
	var last time.Time
	for _, f := range files {
		if fi, err := os.Stat(f); err == nil && fi.ModTime().After(last) {
			last = fi.ModTime()
		}
	}
	return last
}
