package executor

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/pkg/envfile"
	"github.com/gridwire/gridwire/pkg/target"
)

// fakeQsub is a qsub that records its arguments and its environment beside the job and
// prints a PBS job ID.
func fakeQsub(t *testing.T) {
	t.Helper()
	bin := t.TempDir()
	body := "#!/bin/sh\nprintf '%s\\n' \"$*\" > \"$GW_WORKDIR\"/qsub.args\nenv > \"$GW_WORKDIR\"/qsub.env\necho 77.pbs-server\n"
	if err := os.WriteFile(filepath.Join(bin, "qsub"), []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+":"+os.Getenv("PATH"))
}

// pbsTask is a DDS task with properties incarnated for a PBS cluster: START hands the JOB
// script to qsub; jobBody is the JOB script.
func pbsTask(wd, jobBody string) events.State {
	inc := events.IncarnatedData{Cluster: "pbs", WorkDir: wd, NativeIDPattern: `^\s*([0-9]+(?:\.[A-Za-z0-9._-]+)?)\s*$`,
		Scripts: map[string]events.Script{
			events.ScriptJob:   {Body: jobBody},
			events.ScriptStart: {Body: "cd \"$GW_WORKDIR\" || exit 1\nexec qsub \"$GW_WORKDIR\"/.gridwire/job.sh\n"},
		}}
	return ddsState(filepath.Base(wd), inc, true)
}

// A task on a batch target gets the property API's address and credential in a file
// beside it (0600, the starting user's, replaced whole, never left half written), not in
// the environment qsub sees; the credential is in no script, argument, error or log line.
func TestBatchTaskGetsThePropertyFile(t *testing.T) {
	fakeQsub(t)
	const token = "gwt1.SECRET'$(touch pwned)"
	var logs bytes.Buffer
	props := &Properties{Addr: "10.0.0.5:8080", Credential: func(id string) string { return token + id }}
	tg := &ScriptTarget{Cluster: "pbs", Shells: []Shell{target.Local{}}, Batch: true, Properties: props,
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	wd := filepath.Join(t.TempDir(), events.NewID())
	file := filepath.Join(wd, envfile.PropertyFile)
	// What an earlier attempt may have left: a file others could read, a half-made one.
	if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{file, file + ".new"} {
		if err := os.WriteFile(f, []byte("stale\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	st := pbsTask(wd, jobScript(wd, envfile.Load(`"$GW_WORKDIR"/`+envfile.PropertyFile, events.VarPropertyToken)+"true"))
	run, err := tg.Start(context.Background(), st)
	if err != nil || run.NativeID != "77.pbs-server" {
		t.Fatalf("start: %+v %v", run, err)
	}
	fi, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 || int(fi.Sys().(*syscall.Stat_t).Uid) != os.Geteuid() {
		t.Errorf("the property file has mode %v, owner %d; want 0600, %d", fi.Mode().Perm(), fi.Sys().(*syscall.Stat_t).Uid, os.Geteuid())
	}
	if _, err := os.Stat(file + ".new"); !os.IsNotExist(err) {
		t.Errorf("the file's temporary is still there: %v", err)
	}
	b, _ := os.ReadFile(file)
	vars, err := envfile.Decode(string(b))
	want := []envfile.Var{{Name: events.VarPropertyURL, Value: "http://10.0.0.5:8080"}, {Name: events.VarPropertyToken, Value: token + st.JobID}}
	if err != nil || len(vars) != 2 || vars[0] != want[0] || vars[1] != want[1] {
		t.Fatalf("the property file holds %q (%v), want %v", b, err, want)
	}
	qenv, _ := os.ReadFile(filepath.Join(wd, "qsub.env"))
	qargs, _ := os.ReadFile(filepath.Join(wd, "qsub.args"))
	if len(qenv) == 0 || strings.Contains(string(qenv), "GRIDWIRE_PROPERTY") || strings.Contains(string(qargs), "SECRET") {
		t.Errorf("qsub saw the property API (args %q):\n%s", qargs, qenv)
	}
	for name, s := range map[string]string{"JOB script on disk": readFile(t, filepath.Join(wd, events.ScriptFile)),
		"START": st.Incarnation.Scripts[events.ScriptStart].Body, "log": logs.String()} {
		if strings.Contains(s, "SECRET") {
			t.Errorf("the credential is in the %s:\n%s", name, s)
		}
	}
	if _, err := os.Stat("pwned"); err == nil {
		t.Fatal("the credential ran as shell")
	}
}

// The file's credential reaches the job on its node through the JOB script's reading,
// and the file goes with the working directory (the profile's DELETE, as retention or
// cleanup runs it).
func TestPropertyFileReachesTheJobAndGoesWithItsDirectory(t *testing.T) {
	fakeQsub(t)
	props := &Properties{Addr: "10.0.0.5:8080", Credential: func(id string) string { return "tok-" + id }}
	tg := &ScriptTarget{Cluster: "pbs", Shells: []Shell{target.Local{}}, Batch: true, Properties: props}
	wd := filepath.Join(t.TempDir(), events.NewID())
	load := envfile.Load(`"$GW_WORKDIR"/`+envfile.PropertyFile, events.VarPropertyURL, events.VarPropertyToken)
	st := pbsTask(wd, jobScript(wd, load+`printf '%s %s' "$GRIDWIRE_PROPERTY_URL" "$GRIDWIRE_PROPERTY_TOKEN"`))
	if _, err := tg.Start(context.Background(), st); err != nil {
		t.Fatal(err)
	}
	// The batch system runs the JOB script on its node without the submitting environment.
	if out, err := (target.Local{}).Run(context.Background(), "env -i /bin/sh "+filepath.Join(wd, events.ScriptFile)); err != nil || !out.OK() {
		t.Fatalf("JOB: %v %s", err, out.Describe())
	}
	if got := readFile(t, filepath.Join(wd, events.StdoutFile)); got != "http://10.0.0.5:8080 tok-"+st.JobID {
		t.Fatalf("the job saw %q", got)
	}
	if out, err := (target.Local{}).Run(context.Background(), target.WithVars(map[string]string{events.VarWorkDir: wd}, `rm -rf -- "$GW_WORKDIR"`)); err != nil || !out.OK() {
		t.Fatalf("DELETE: %v %s", err, out.Describe())
	}
	if _, err := os.Stat(filepath.Join(wd, envfile.PropertyFile)); !os.IsNotExist(err) {
		t.Fatalf("the property file outlived its directory: %v", err)
	}
}

// A JOB script that does not read the file (an incarnation recorded before it did) has
// the variables in START's environment, as before; a fork-like target never writes it.
func TestPropertyFileOnlyForJobsThatReadIt(t *testing.T) {
	fakeQsub(t)
	props := &Properties{Addr: "10.0.0.5:8080", Credential: func(id string) string { return "tok-" + id }}
	tg := &ScriptTarget{Cluster: "pbs", Shells: []Shell{target.Local{}}, Batch: true, Properties: props}
	wd := filepath.Join(t.TempDir(), events.NewID())
	st := pbsTask(wd, jobScript(wd, "true"))
	if _, err := tg.Start(context.Background(), st); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(wd, envfile.PropertyFile)); !os.IsNotExist(err) {
		t.Errorf("a property file for a JOB script that does not read it: %v", err)
	}
	if qenv := readFile(t, filepath.Join(wd, "qsub.env")); !strings.Contains(qenv, events.VarPropertyToken+"=tok-"+st.JobID+"\n") {
		t.Errorf("qsub's environment lacks the credential:\n%s", qenv)
	}
	file, env, err := batchEnv(nil, "reads "+envfile.PropertyFile)
	if file != "" || env != nil || err != nil {
		t.Errorf("batchEnv of a job without properties: %q %v %v", file, env, err)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A property file that cannot be written fails the start before START runs, and
// releases the start lock, so a later attempt may start the job.
func TestUnwritablePropertyFileFailsTheStart(t *testing.T) {
	fakeQsub(t)
	props := &Properties{Addr: "10.0.0.5:8080", Credential: func(id string) string { return "tok-" + id }}
	tg := &ScriptTarget{Cluster: "pbs", Shells: []Shell{target.Local{}}, Batch: true, Properties: props}
	wd := filepath.Join(t.TempDir(), events.NewID())
	// A directory where the file's temporary goes: neither created nor removed by rm -f.
	if err := os.MkdirAll(filepath.Join(wd, envfile.PropertyFile+".new", "x"), 0o700); err != nil {
		t.Fatal(err)
	}
	st := pbsTask(wd, jobScript(wd, envfile.Load(`"$GW_WORKDIR"/`+envfile.PropertyFile, events.VarPropertyToken)+"true"))
	_, err := tg.Start(context.Background(), st)
	if err == nil || !strings.Contains(err.Error(), "cannot write the property API's file") {
		t.Fatalf("start: %v; want the property file refused", err)
	}
	if _, err := os.Stat(filepath.Join(wd, "qsub.args")); !os.IsNotExist(err) {
		t.Fatal("qsub ran without the property file")
	}
	if _, err := os.Stat(filepath.Join(wd, startLock)); !os.IsNotExist(err) {
		t.Fatalf("the start lock is still held: %v", err)
	}
}
