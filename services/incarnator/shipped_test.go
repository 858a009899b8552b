package incarnator

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/pkg/cluster"
	"github.com/gridwire/gridwire/pkg/proctest"
)

func TestBuiltinProfilesAreTheDeployCopy(t *testing.T) {
	deploy := filepath.Join("..", "..", "deploy", "profiles")
	embedded, err := fs.ReadDir(builtinProfiles, "profiles")
	if err != nil {
		t.Fatal(err)
	}
	onDisk, err := os.ReadDir(deploy)
	if err != nil {
		t.Fatal(err)
	}
	var a, b []string
	for _, e := range embedded {
		a = append(a, e.Name())
	}
	for _, e := range onDisk {
		b = append(b, e.Name())
	}
	if !slices.Equal(a, b) {
		t.Fatalf("files differ: embedded %v, deploy/profiles %v", a, b)
	}
	for _, name := range a {
		x, _ := fs.ReadFile(builtinProfiles, "profiles/"+name)
		y, _ := os.ReadFile(filepath.Join(deploy, name))
		if !bytes.Equal(x, y) {
			t.Errorf("%s: services/incarnator/profiles and deploy/profiles differ; copy one over the other", name)
		}
	}
	if err := CheckProfiles(deploy); err != nil {
		t.Errorf("deploy/profiles: %v", err)
	}
	set, err := LoadProfiles("")
	if err != nil {
		t.Fatal(err)
	}
	if got := set.Names(); !slices.Equal(got, []string{"fork", "linux", "pbs", "slurm"}) {
		t.Errorf("built-in profiles %v", got)
	}
}

func TestForkProfileRunsAJob(t *testing.T) {
	root := t.TempDir()
	p := mustPlanner(t, testSet(t, nil), forkCluster(root))
	job := events.Job{ID: "01FORK", Executable: "/bin/sh", Stdin: "in.txt",
		Arguments:   []string{"-c", `read l; echo "got $l $X"; echo err >&2; exit 3`},
		Environment: []events.EnvVar{{Name: "X", Value: "y z"}}}
	inc, err := p.Plan(job)
	if err != nil {
		t.Fatal(err)
	}
	if inc.WorkDir != filepath.Join(root, "01FORK") || inc.Profile != "fork" || inc.Cluster != "local" {
		t.Fatalf("plan %+v", inc)
	}
	writeJob(t, inc)
	os.WriteFile(filepath.Join(inc.WorkDir, events.StdinFile), []byte("in data\n"), 0o600)
	vars := map[string]string{events.VarWorkDir: inc.WorkDir, events.VarJobID: job.ID}
	out, err := runScript(t, "/bin/sh", inc.Scripts[events.ScriptStart].Body, vars, "")
	if err != nil {
		t.Fatalf("START: %v: %s", err, out)
	}
	pid := nativeID(t, inc.NativeIDPattern, out)
	if got := waitFile(t, filepath.Join(inc.WorkDir, events.ExitFile)); got != "3\n" {
		t.Errorf("exit status %q", got)
	}
	if got, _ := os.ReadFile(filepath.Join(inc.WorkDir, events.StdoutFile)); string(got) != "got in data y z\n" {
		t.Errorf("stdout %q", got)
	}
	if got, _ := os.ReadFile(filepath.Join(inc.WorkDir, events.StderrFile)); string(got) != "err\n" {
		t.Errorf("stderr %q", got)
	}
	waitState(t, inc, pid, "")
	if inc.AbsentState != NativeEnded {
		t.Errorf("absent state %q", inc.AbsentState)
	}

	out, err = runScript(t, "/bin/sh", inc.Scripts[events.ScriptList+":DIR"].Body, vars, "")
	if err != nil || !strings.Contains(out, ".gridwire") {
		t.Errorf("LIST:DIR: %v %q", err, out)
	}
	out, err = runScript(t, "/bin/sh", inc.Scripts[events.ScriptList+":FILE"].Body, map[string]string{"GW_PATH": filepath.Join(inc.WorkDir, events.ExitFile)}, "")
	if err != nil || !strings.Contains(out, "exit_status") {
		t.Errorf("LIST:FILE: %v %q", err, out)
	}
	if out, err = runScript(t, "/bin/sh", inc.Scripts[events.ScriptDelete].Body, vars, ""); err != nil {
		t.Errorf("DELETE: %v %s", err, out)
	}
	if _, err := os.Stat(inc.WorkDir); !os.IsNotExist(err) {
		t.Errorf("DELETE left the working directory: %v", err)
	}
}

func TestForkProfileHoldsResumesAborts(t *testing.T) {
	root := t.TempDir()
	p := mustPlanner(t, testSet(t, nil), forkCluster(root))
	inc, err := p.Plan(events.Job{ID: "01SLEEP", Executable: "sleep", Arguments: []string{"60"}})
	if err != nil {
		t.Fatal(err)
	}
	writeJob(t, inc)
	vars := map[string]string{events.VarWorkDir: inc.WorkDir, events.VarJobID: "01SLEEP"}
	out, err := runScript(t, "/bin/sh", inc.Scripts[events.ScriptStart].Body, vars, "")
	if err != nil {
		t.Fatal(err)
	}
	pid := nativeID(t, inc.NativeIDPattern, out)
	vars[events.VarNativeID] = pid
	t.Cleanup(func() { runScript(t, "/bin/sh", inc.Scripts[events.ScriptAbort].Body, vars, "") })
	waitState(t, inc, pid, NativeRunning)
	for _, step := range []struct{ script, want string }{
		{events.ScriptHold, NativeHeld}, {events.ScriptResume, NativeRunning}, {events.ScriptAbort, ""},
	} {
		if out, err := runScript(t, "/bin/sh", inc.Scripts[step.script].Body, vars, ""); err != nil {
			t.Fatalf("%s: %v %s", step.script, err, out)
		}
		waitState(t, inc, pid, step.want)
	}
	if _, err := os.Stat(filepath.Join(inc.WorkDir, events.ExitFile)); err == nil {
		t.Error("an aborted job wrote an exit status")
	}
}

// startFork renders job on a fork cluster under a fresh root, starts it with START and
// returns the plan, its variables (the native ID among them) and its PID. Whatever the
// job leaves running is killed with the test.
func startFork(t *testing.T, cl cluster.Cluster, job events.Job) (events.IncarnatedData, map[string]string, int) {
	t.Helper()
	cl.WorkRoot = t.TempDir()
	t.Cleanup(func() { proctest.KillSessionsNaming(cl.WorkRoot) })
	inc, err := mustPlanner(t, testSet(t, nil), cl).Plan(job)
	if err != nil {
		t.Fatal(err)
	}
	writeJob(t, inc)
	vars := map[string]string{events.VarWorkDir: inc.WorkDir, events.VarJobID: job.ID}
	out, err := runScript(t, "/bin/sh", inc.Scripts[events.ScriptStart].Body, vars, "")
	if err != nil {
		t.Fatalf("START: %v %s", err, out)
	}
	vars[events.VarNativeID] = nativeID(t, inc.NativeIDPattern, out)
	pid, _ := strconv.Atoi(vars[events.VarNativeID])
	return inc, vars, pid
}

// waitGroupGone fails the test unless the job's group ends. The bound only keeps a
// broken test from hanging.
func waitGroupGone(t *testing.T, pgid int, what string) {
	t.Helper()
	if !proctest.GroupEnds(pgid, 30*time.Second) {
		t.Fatalf("%s: a process of the job's group %d still runs", what, pgid)
	}
}

// A fork target has no batch system to end what a job leaves behind: the JOB script
// sends TERM to its group once the program has ended, before it writes the exit status.
func TestForkJobEndTermsWhatTheProgramLeftRunning(t *testing.T) {
	inc, _, pid := startFork(t, forkCluster(""), events.Job{ID: "01LEFT", Executable: "/bin/sh",
		Arguments: []string{"-c", "sleep 60 & echo $! >bg.pid"}})
	if got := waitFile(t, filepath.Join(inc.WorkDir, events.ExitFile)); got != "0\n" {
		t.Fatalf("exit status %q", got)
	}
	if b, _ := os.ReadFile(filepath.Join(inc.WorkDir, "bg.pid")); len(b) == 0 {
		t.Fatal("the program did not start its background sleep")
	}
	waitGroupGone(t, pid, "after the job ended")
}

// ABORT ends a job that ignores TERM: KILL follows after KILL_WAIT seconds (an
// operator's field, 1 here), and ABORT itself has returned long before.
func TestForkProfileAbortKillsWhatIgnoresTerm(t *testing.T) {
	cl := forkCluster("")
	cl.Fields = map[string]string{"KILL_WAIT": "1"}
	inc, vars, pid := startFork(t, cl, events.Job{ID: "01STUBBORN", Executable: "/bin/sh",
		Arguments: []string{"-c", "trap '' TERM; sleep 60 & sleep 60; wait"}})
	waitState(t, inc, vars[events.VarNativeID], NativeRunning)
	if out, err := runScript(t, "/bin/sh", inc.Scripts[events.ScriptAbort].Body, vars, ""); err != nil {
		t.Fatalf("ABORT: %v %s", err, out)
	}
	waitGroupGone(t, pid, "after ABORT")
	if _, err := os.Stat(filepath.Join(inc.WorkDir, events.ExitFile)); err == nil {
		t.Error("an aborted job wrote an exit status")
	}
}

// A job's resource limits hold for its program: the kernel's own table of the
// program's limits (/proc/self/limits) shows each, soft and hard, in the limit's unit.
// A limit the target will not set (above its hard limit) ends the run before the
// program starts, saying which; a resource the JOB script has no ulimit for is refused
// when the job is rendered.
func TestForkJobRunsUnderItsLimits(t *testing.T) {
	limits := []events.Limit{{Resource: events.LimitCPUTime, Value: 3600}, {Resource: events.LimitFileSize, Value: 1 << 30},
		{Resource: events.LimitCoreSize, Value: 0}, {Resource: events.LimitDataSize, Value: 4 << 30},
		{Resource: events.LimitLockedMemory, Value: 65536 + 100}, {Resource: events.LimitOpenFiles, Value: 256},
		{Resource: events.LimitStackSize, Value: 8 << 20}, {Resource: events.LimitVirtualMemory, Value: 8 << 30}}
	inc, _, _ := startFork(t, forkCluster(""), events.Job{ID: "01LIMITS", Executable: "/bin/cat",
		Arguments: []string{"/proc/self/limits"}, Limits: limits})
	if got := waitFile(t, filepath.Join(inc.WorkDir, events.ExitFile)); got != "0\n" {
		t.Fatalf("exit status %q", got)
	}
	out, _ := os.ReadFile(filepath.Join(inc.WorkDir, events.StdoutFile))
	for _, want := range []string{"Max cpu time              3600                 3600", "Max file size             1073741824           1073741824",
		"Max core file size        0                    0", "Max data size             4294967296           4294967296",
		"Max locked memory         65536                65536", "Max open files            256                  256",
		"Max stack size            8388608              8388608", "Max address space         8589934592           8589934592"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the program's limits lack %q:\n%s", want, out)
		}
	}

	inc, _, _ = startFork(t, forkCluster(""), events.Job{ID: "01TOOMANY", Executable: "/bin/true",
		Limits: []events.Limit{{Resource: events.LimitOpenFiles, Value: 1 << 40}}})
	if got := waitFile(t, filepath.Join(inc.WorkDir, events.ExitFile)); got != "124\n" {
		t.Errorf("exit status %q, want 124", got)
	}
	if got, _ := os.ReadFile(filepath.Join(inc.WorkDir, events.StderrFile)); !strings.Contains(string(got),
		"gridwire: the target refused the job's open_files limit (ulimit -n 1099511627776)") {
		t.Errorf("stderr %q", got)
	}

	p := mustPlanner(t, testSet(t, nil), forkCluster(t.TempDir()))
	for _, l := range []events.Limit{{Resource: "processes", Value: 5}, {Resource: events.LimitCPUTime, Value: -1}} {
		if _, err := p.Plan(events.Job{ID: "01BAD", Executable: "/bin/true", Limits: []events.Limit{l}}); err == nil ||
			!strings.Contains(err.Error(), "limits[0]: ") {
			t.Errorf("limit %+v rendered (%v)", l, err)
		}
	}
}

// waitState polls GET_JOB_STATUS until the job shows the canonical state want ("" =
// absent or ENDED). The bound only keeps a broken test from hanging.
func waitState(t *testing.T, inc events.IncarnatedData, pid, want string) {
	t.Helper()
	var got string
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		out, err := runScript(t, "/bin/sh", inc.Scripts[events.ScriptStatus].Body, map[string]string{events.VarNativeIDList: pid + " 999999999"}, "")
		if err != nil {
			t.Fatalf("GET_JOB_STATUS: %v %s", err, out)
		}
		got = statusLines(t, inc, out)[pid]
		if got == want || want == "" && got == NativeEnded {
			return
		}
	}
	t.Fatalf("job %s: state %q, want %q", pid, got, want)
}

func slurmCluster(root string) cluster.Cluster {
	return cluster.Cluster{Name: "hpc", Kind: cluster.KindSSH, Hosts: []string{"login1:2222"}, Profile: "slurm",
		LRMS: "Slurm", Queues: []string{"batch", "debug"}, WorkRoot: root}
}

func TestSlurmProfile(t *testing.T) {
	root := t.TempDir()
	rec := filepath.Join(t.TempDir(), "rec")
	bin := fakeBin(t, map[string]string{
		"sbatch":   `printf '%s\n' "$@" > ` + rec + `; [ "$TZ" = UTC ] || exit 9; echo "4242;hpc"`,
		"squeue":   `printf '4242 PENDING None\n4243 PENDING JobHeldUser\n4245 RUNNING None\n9 RUNNING None\n'`,
		"sacct":    `printf "%s\n" "$*" > ` + rec + `.sacct; printf '4244|CANCELLED by 0\n'`,
		"scontrol": `echo "scontrol $*" > ` + rec,
		"scancel":  `echo "scancel $*" > ` + rec,
	})
	p := mustPlanner(t, testSet(t, nil), slurmCluster(root))
	begin := time.Date(2030, 1, 2, 15, 4, 5, 0, time.FixedZone("CET", 3600))
	job := events.Job{ID: "01SLURM", Name: "my job", Executable: "app", Count: 4, Duration: 90 * time.Second, StartTime: &begin,
		Requirements: events.Requirements{Queue: "debug", LRMS: []events.LRMSRule{{Is: "slurm"}}}}
	inc, err := p.Plan(job)
	if err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{events.VarWorkDir: inc.WorkDir, events.VarJobID: job.ID, events.VarNativeID: "4242"}
	out, err := runScript(t, "/bin/sh", inc.Scripts[events.ScriptStart].Body, vars, bin)
	if err != nil {
		t.Fatalf("START: %v %s", err, out)
	}
	if id := nativeID(t, inc.NativeIDPattern, out); id != "4242" || inc.Queue != "debug" {
		t.Errorf("native ID %q, queue %q", id, inc.Queue)
	}
	want := []string{"--parsable", "--job-name=my job", "--chdir=" + inc.WorkDir, "--output=/dev/null", "--error=/dev/null",
		"--ntasks=4", "--partition=debug", "--time=2", "--begin=2030-01-02T14:04:05", inc.WorkDir + "/.gridwire/job.sh"}
	if got := readLines(t, rec); !slices.Equal(got, want) {
		t.Errorf("sbatch argv\n got %q\nwant %q", got, want)
	}

	installStatics(t, inc)
	if len(inc.StaticScripts) != 1 || !strings.HasPrefix(inc.StaticScripts["gw-slurm-status"].Location, root+"/.gridwire-bin/gw-slurm-status-") {
		t.Fatalf("static scripts %+v", inc.StaticScripts)
	}
	out, err = runScript(t, "/bin/sh", inc.Scripts[events.ScriptStatus].Body, map[string]string{events.VarNativeIDList: "4242 4243 4244 4245"}, bin)
	if err != nil {
		t.Fatalf("GET_JOB_STATUS: %v %s", err, out)
	}
	states := statusLines(t, inc, out)
	wantStates := map[string]string{"4242": NativeQueued, "4243": NativeHeld, "4244": NativeEnded, "4245": NativeRunning}
	if len(states) != len(wantStates) {
		t.Errorf("states %v, want %v (output %q)", states, wantStates, out)
	}
	for id, s := range wantStates {
		if states[id] != s {
			t.Errorf("job %s: %q, want %q (output %q)", id, states[id], s, out)
		}
	}
	if got := readLines(t, rec+".sacct"); !slices.Contains(got, "-n -X -P -o JobIDRaw,State -j 4244") {
		t.Errorf("sacct asked %q; only jobs squeue does not know go to sacct", got)
	}
	for script, want := range map[string]string{events.ScriptHold: "scontrol hold 4242", events.ScriptResume: "scontrol release 4242", events.ScriptAbort: "scancel 4242"} {
		if out, err := runScript(t, "/bin/sh", inc.Scripts[script].Body, vars, bin); err != nil {
			t.Fatalf("%s: %v %s", script, err, out)
		}
		if got := readLines(t, rec); len(got) != 1 || got[0] != want {
			t.Errorf("%s ran %q, want %q", script, got, want)
		}
	}
}

func TestSlurmOverridesTheMPIApplication(t *testing.T) {
	set := testSet(t, nil)
	job := events.Job{ID: "01MPI", Executable: "./solver", Arguments: []string{"in put"}, Count: 8, MPI: true, JobType: events.JobMPI}
	for profile, want := range map[string]string{"slurm": "srun --ntasks=8 ./solver 'in put'", "fork": "mpirun -np 8 ./solver 'in put'"} {
		cl := slurmCluster(t.TempDir())
		if profile == "fork" {
			cl = forkCluster(t.TempDir())
		}
		inc, err := mustPlanner(t, set, cl).Plan(job)
		if err != nil {
			t.Fatal(err)
		}
		if body := inc.Scripts[events.ScriptJob].Body; !strings.Contains(body, "(\n"+want+"\n)") {
			t.Errorf("%s: JOB does not run %q:\n%s", profile, want, body)
		}
	}
}

func TestPBSProfile(t *testing.T) {
	root := t.TempDir()
	rec := filepath.Join(t.TempDir(), "rec")
	bin := fakeBin(t, map[string]string{
		"qsub":  `printf '%s\n' "$@" > ` + rec + `; echo 77.pbs-server`,
		"qstat": `[ "$1" = -x ] || exit 1; printf 'Job Id: 77.pbs-server\n    Job_Name = gw\n    job_state = R\nJob Id: 78.pbs-server\n    job_state = H\n'`,
		"qhold": `echo "qhold $*" > ` + rec,
		"qrls":  `echo "qrls $*" > ` + rec,
		"qdel":  `echo "qdel $*" > ` + rec,
	})
	cl := cluster.Cluster{Name: "pbs", Kind: cluster.KindSSH, Hosts: []string{"head"}, Profile: "pbs", LRMS: "PBS", Queues: []string{"workq"}, WorkRoot: root}
	p := mustPlanner(t, testSet(t, nil), cl)
	begin := time.Date(2030, 1, 2, 15, 4, 5, 0, time.UTC)
	inc, err := p.Plan(events.Job{ID: "01PBS", Name: "a job!", Executable: "app", Count: 2, Duration: 3725 * time.Second, StartTime: &begin})
	if err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{events.VarWorkDir: root, events.VarJobID: "01PBS", events.VarNativeID: "77.pbs-server"}
	out, err := runScript(t, "/bin/sh", inc.Scripts[events.ScriptStart].Body, vars, bin)
	if err != nil {
		t.Fatalf("START: %v %s", err, out)
	}
	if id := nativeID(t, inc.NativeIDPattern, out); id != "77.pbs-server" {
		t.Errorf("native ID %q", id)
	}
	want := []string{"-N", "gwa_job_", "-o", "/dev/null", "-e", "/dev/null", "-l", "select=1:ncpus=2,walltime=1:2:5", "-q", "workq", "-a", "203001021504.05", root + "/.gridwire/job.sh"}
	if got := readLines(t, rec); !slices.Equal(got, want) {
		t.Errorf("qsub argv\n got %q\nwant %q", got, want)
	}
	installStatics(t, inc)
	out, err = runScript(t, "/bin/sh", inc.Scripts[events.ScriptStatus].Body, map[string]string{events.VarNativeIDList: "77.pbs-server 78.pbs-server"}, bin)
	if err != nil {
		t.Fatal(err)
	}
	if st := statusLines(t, inc, out); st["77.pbs-server"] != NativeRunning || st["78.pbs-server"] != NativeHeld {
		t.Errorf("states %v from %q", st, out)
	}
	for script, want := range map[string]string{events.ScriptHold: "qhold 77.pbs-server", events.ScriptResume: "qrls 77.pbs-server", events.ScriptAbort: "qdel 77.pbs-server"} {
		if out, err := runScript(t, "/bin/sh", inc.Scripts[script].Body, vars, bin); err != nil {
			t.Fatalf("%s: %v %s", script, err, out)
		}
		if got := readLines(t, rec); len(got) != 1 || got[0] != want {
			t.Errorf("%s ran %q, want %q", script, got, want)
		}
	}
}

func readLines(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
}
