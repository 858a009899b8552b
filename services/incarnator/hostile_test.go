package incarnator

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/pkg/cluster"
)

// hostile values: each, if any shell read it as code, would create a file named PWNED
// or otherwise change the words the program receives.
var hostile = []string{
	"$(touch PWNED)", "`touch PWNED`", "'; touch PWNED; '", `"; touch PWNED; "`, "a\ntouch PWNED", "\ntouch PWNED\n",
	"; touch PWNED", "| touch PWNED", "&& touch PWNED", "> PWNED", "< /etc/passwd", "$(touch PWNED)\n",
	`"$(touch PWNED)"`, `'$(touch PWNED)'`, `\'$(touch PWNED)\'`, `'"'"'$(touch PWNED)`, `\`, `\\`, `'`, `"`, `'\''`,
	"*", "?", "[a-z]*", ".*", "/*", "~", "~root", "-rf", "--help", "-", "--", "-n", "-e", "$HOME", "${IFS}", "$IFS",
	"$((1+1))", "${x:=PWNED}", "$0", "$@", "$*", "$$", "!!", "#not a comment", "a=b", "PWNED=1", "%s%n%x",
	"a b\tc", " ", "", "\r\n", "\x01\x1b[31m\x7f", "é ü 日本", "$'\\x41'", "}", "{a,b}", "(", ")", "&", ";", "|",
	"<<EOF", "EOF", "\nEOF\ntouch PWNED\n", "a\\\ntouch PWNED",
}

// hostileProfile has an application template that places every field F<i> in each
// shell context a template may use: plain, double quotes, single quotes, an assignment
// word, a command substitution, and a two-level replacement.
func hostileProfile(n int) string {
	var body strings.Builder
	body.WriteString("<EXECUTABLE> <ARGUMENTS>")
	for i := 0; i < n; i++ {
		f := fmt.Sprintf("<F%d", i)
		fmt.Fprintf(&body, ` %s> "x%s>y" 'x%s>y' x=%s> "$(printf '%%s' %s>)" %s/a/b>`, f, f, f, f, f, f)
	}
	return `<?xml version="1.0"?>
<osp:Profile xmlns:osp="http://gpe.intel.com/osprs/profile" xmlns:idb="http://gpe.intel.com/idb" name="hostile" extends="fork">
  <idb:Template name="SHOW">
    <idb:Invocation name=""><idb:Body><![CDATA[` + body.String() + `]]></idb:Body></idb:Invocation>
  </idb:Template>
  <osp:Application name="show" template="SHOW">
    <osp:ApplicationName>show</osp:ApplicationName>
    <osp:ApplicationVersion>1</osp:ApplicationVersion>
  </osp:Application>
</osp:Profile>
`
}

// printargs writes its arguments to stdout and its environment to stderr, each NUL
// terminated, and its working directory to $CWDFILE.
const printargs = `for a in "$@"; do printf '%s\0' "$a"; done
env -0 >&2
/bin/pwd > "$CWDFILE"`

// shells are the distinct shells /bin/sh may be on a target.
func shells() []string {
	var out []string
	seen := map[string]bool{}
	for _, s := range []string{"/bin/sh", "/bin/dash", "/bin/bash"} {
		real, err := filepath.EvalSymlinks(s)
		if err == nil && !seen[real] {
			seen[real] = true
			out = append(out, s)
		}
	}
	return out
}

// hostileRun plans the job on a fork cluster of the hostile profile, runs its JOB
// script with shell, and returns the program's argv and environment.
func hostileRun(t *testing.T, shell string, job events.Job, root string) (argv, env []string, inc events.IncarnatedData) {
	t.Helper()
	set := testSet(t, map[string]string{"hostile.xml": hostileProfile(len(hostile))})
	cl := cluster.Cluster{Name: "local", Kind: cluster.KindFork, Profile: "hostile", LRMS: "Fork", WorkRoot: root}
	inc, err := mustPlanner(t, set, cl).Plan(job)
	if err != nil {
		t.Fatal(err)
	}
	writeJob(t, inc)
	if job.Directory != "" {
		if err := os.Mkdir(filepath.Join(inc.WorkDir, job.Directory), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(shell, events.ScriptFile)
	cmd.Dir = inc.WorkDir
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: job script failed: %v %s", shell, err, out)
	}
	if status, _ := os.ReadFile(filepath.Join(inc.WorkDir, events.ExitFile)); string(status) != "0\n" {
		t.Errorf("%s: exit status %q", shell, status)
	}
	noneRan(t, shell, root)
	stdout, _ := os.ReadFile(filepath.Join(inc.WorkDir, events.StdoutFile))
	stderr, _ := os.ReadFile(filepath.Join(inc.WorkDir, events.StderrFile))
	return splitNUL(stdout), splitNUL(stderr), inc
}

func splitNUL(b []byte) []string {
	s := strings.Split(string(b), "\x00")
	return s[:len(s)-1]
}

func noneRan(t *testing.T, where, root string) {
	t.Helper()
	filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err == nil && strings.Contains(d.Name(), "PWNED") && !d.IsDir() {
			t.Errorf("%s: something ran: %s exists", where, path)
		}
		return nil
	})
}

func TestHostileValuesArriveAsOneWordAndNothingRuns(t *testing.T) {
	bin := fakeBin(t, map[string]string{"printargs": printargs})
	job := events.Job{ID: "01HOSTILE", Executable: filepath.Join(bin, "printargs"), LibraryPath: hostile,
		Application: &events.Application{Name: "show", Version: "1"}, Fields: map[string]string{}}
	var wantArgs, wantEnv []string
	for i, v := range hostile {
		job.Arguments = append(job.Arguments, v, "-"+v, v+v)
		job.Environment = append(job.Environment, events.EnvVar{Name: fmt.Sprintf("H%d", i), Value: v})
		job.Fields[fmt.Sprintf("F%d", i)] = v
		wantEnv = append(wantEnv, fmt.Sprintf("H%d=%s", i, v))
	}
	wantArgs = append(wantArgs, job.Arguments...)
	for _, v := range hostile {
		wantArgs = append(wantArgs, v, "x"+v+"y", "x"+v+"y", "x="+v, strings.TrimRight(v, "\n"), strings.ReplaceAll(v, "a", "b"))
	}
	wantEnv = append(wantEnv, "LD_LIBRARY_PATH="+strings.Join(hostile, ":"))
	for _, shell := range shells() {
		for _, app := range []bool{true, false} {
			root := t.TempDir()
			job := job
			job.Environment = append(job.Environment, events.EnvVar{Name: "CWDFILE", Value: filepath.Join(root, "cwd")})
			want := wantArgs
			if !app {
				job.Application = nil
				want = job.Arguments
			}
			argv, env, _ := hostileRun(t, shell, job, root)
			for i := 0; i < len(want) || i < len(argv); i++ {
				if i >= len(want) || i >= len(argv) || argv[i] != want[i] {
					t.Errorf("%s (application %v): argument %d: got %q, want %q", shell, app, i, at(argv, i), at(want, i))
					break
				}
			}
			for _, e := range wantEnv {
				if !slices.Contains(env, e) {
					t.Errorf("%s: environment lacks %q", shell, e)
				}
			}
		}
	}
}

func at(s []string, i int) string {
	if i < len(s) {
		return s[i]
	}
	return "(none)"
}

// TestHostileDirectory: a job's directory is one word to cd, whatever its name.
func TestHostileDirectory(t *testing.T) {
	bin := fakeBin(t, map[string]string{"printargs": printargs})
	for _, v := range hostile {
		if v == "" || v == "." || v == ".." || strings.Contains(v, "/") {
			continue
		}
		root := t.TempDir()
		job := events.Job{ID: "01DIR", Executable: filepath.Join(bin, "printargs"), Directory: v, Arguments: []string{v},
			Environment: []events.EnvVar{{Name: "CWDFILE", Value: filepath.Join(root, "cwd")}}}
		argv, _, inc := hostileRun(t, "/bin/sh", job, root)
		cwd, _ := os.ReadFile(filepath.Join(root, "cwd"))
		if want := filepath.Join(inc.WorkDir, v) + "\n"; string(cwd) != want || !slices.Equal(argv, []string{v}) {
			t.Errorf("directory %q: ran in %q with %q", v, cwd, argv)
		}
	}
}

func TestHostileExecutableNeverRuns(t *testing.T) {
	set := testSet(t, nil)
	for _, v := range hostile {
		root := t.TempDir()
		inc, err := mustPlanner(t, set, forkCluster(root)).Plan(events.Job{ID: "01EXE", Executable: v})
		if v == "" || strings.HasPrefix(v, "-") {
			if err == nil {
				t.Errorf("executable %q was accepted", v)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%q: %v", v, err)
		}
		writeJob(t, inc)
		cmd := exec.Command("/bin/sh", events.ScriptFile)
		cmd.Dir = inc.WorkDir
		cmd.Env = []string{"PATH=/usr/bin:/bin"}
		cmd.Run()
		if _, err := os.Stat(filepath.Join(inc.WorkDir, "PWNED")); err == nil {
			t.Errorf("executable %q ran code", v)
		}
		status, _ := os.ReadFile(filepath.Join(inc.WorkDir, events.ExitFile))
		if s := string(status); s != "127\n" && s != "126\n" {
			t.Errorf("executable %q: exit status %q, want not found (127) or not executable (126)", v, s)
		}
	}
}

// TestHostileValuesInBatchSubmission runs slurm's START with a recording sbatch: the job
// name and queue arrive whole as one argument each.
func TestHostileValuesInBatchSubmission(t *testing.T) {
	rec := filepath.Join(t.TempDir(), "rec")
	bin := fakeBin(t, map[string]string{"sbatch": `for a in "$@"; do printf '%s\0' "$a"; done > ` + rec + `; echo 1`})
	var queues []string
	for _, v := range hostile {
		if v != "" {
			queues = append(queues, v)
		}
	}
	root := t.TempDir()
	cl := slurmCluster(root)
	cl.Queues = queues
	p := mustPlanner(t, testSet(t, nil), cl)
	for _, v := range queues {
		inc, err := p.Plan(events.Job{ID: "01Q", Name: v, Executable: "x", Requirements: events.Requirements{Queue: v}})
		if err != nil {
			t.Fatal(err)
		}
		out, err := runScript(t, "/bin/sh", inc.Scripts[events.ScriptStart].Body, map[string]string{events.VarWorkDir: root}, bin)
		if err != nil {
			t.Fatalf("%q: %v %s", v, err, out)
		}
		data, _ := os.ReadFile(rec)
		args := strings.Split(strings.TrimSuffix(string(data), "\x00"), "\x00")
		if !slices.Contains(args, "--job-name="+v) || !slices.Contains(args, "--partition="+v) {
			t.Errorf("value %q: sbatch argv %q", v, args)
		}
		if _, err := os.Stat(filepath.Join(root, "PWNED")); err == nil || bytes.Contains([]byte(out), []byte("PWNED")) {
			t.Errorf("value %q ran code", v)
		}
	}
}
