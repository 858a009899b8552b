package executor

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/pkg/shellquote"
	"github.com/gridwire/gridwire/pkg/target"
)

// argsSbatch puts an sbatch on PATH that writes its arguments, one a line, to the file
// it returns and prints "42;hpc".
func argsSbatch(t *testing.T) string {
	t.Helper()
	bin := t.TempDir()
	args := filepath.Join(bin, "args")
	body := "#!/bin/sh\nfor a in \"$@\"; do printf '%s\\n' \"$a\"; done >'" + args + "'\necho '42;hpc'\n"
	if err := os.WriteFile(filepath.Join(bin, "sbatch"), []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+":"+os.Getenv("PATH"))
	return args
}

// hetMember is a co-allocated subjob incarnated on the slurm profile, with its
// component options as the profile renders them (a name with a space and a quote: the
// values reach sbatch as literals).
func hetMember(t *testing.T, name string) events.State {
	wd := filepath.Join(t.TempDir(), events.NewID())
	inc := batchIncarnation(wd)
	inc.NativeIDPattern = `^\s*([0-9]+(?:\+[0-9]+)?)(?:;\S*)?\s*$`
	inc.Scripts[events.ScriptStartComponent] = events.Script{Body: "queue=debug\nset -- \"$@\" --job-name=" + shellquote.Quote(name) +
		" --chdir=\"$GW_WORKDIR\" --ntasks=2\nif [ -n \"$queue\" ]; then set -- \"$@\" --partition=\"$queue\"; fi\n"}
	return events.State{JobID: filepath.Base(wd), Incarnation: &inc}
}

// The leader submits one job with a component per subjob, joined by ":", each with its
// own options and working directory; the followers' JOB scripts and start locks are
// written, so each follower finds its component (42+N) as a run, and the job's script
// runs each JOB script in its component.
func TestHetjobLeaderSubmitsEveryComponent(t *testing.T) {
	args := argsSbatch(t)
	tg := &ScriptTarget{Cluster: "hpc", Shells: []Shell{target.Local{}}, Batch: true}
	members := []events.State{hetMember(t, "lead er"), hetMember(t, "it's b"), hetMember(t, "c")}
	if !tg.hetCapable(members) {
		t.Fatal("three subjobs of one slurm cluster are not capable of a heterogeneous job")
	}
	run, err := tg.startHet(context.Background(), members)
	if err != nil {
		t.Fatal(err)
	}
	if run.NativeID != "42+0" || run.Running {
		t.Errorf("leader started %+v; want 42+0, queued", run)
	}
	got, _ := os.ReadFile(args)
	wd := func(i int) string { return members[i].Incarnation.WorkDir }
	want := strings.Join([]string{"--parsable",
		"--job-name=lead er", "--chdir=" + wd(0), "--ntasks=2", "--partition=debug", ":",
		"--job-name=it's b", "--chdir=" + wd(1), "--ntasks=2", "--partition=debug", ":",
		"--job-name=c", "--chdir=" + wd(2), "--ntasks=2", "--partition=debug",
		wd(0) + "/" + hetjobScript}, "\n") + "\n"
	if string(got) != want {
		t.Errorf("sbatch arguments:\n%s\nwant:\n%s", got, want)
	}
	for i := 1; i < 3; i++ {
		f, found, err := tg.FindRun(context.Background(), members[i])
		if err != nil || !found || f.NativeID != "42+"+string(rune('0'+i)) {
			t.Errorf("follower %d: run %+v found %v err %v; want 42+%d", i, f, found, err, i)
		}
		body, _ := os.ReadFile(filepath.Join(wd(i), events.ScriptFile))
		if string(body) != members[i].Incarnation.Scripts[events.ScriptJob].Body {
			t.Errorf("follower %d's JOB script %q", i, body)
		}
	}
	script, _ := os.ReadFile(filepath.Join(wd(0), hetjobScript))
	for i := 0; i < 3; i++ {
		line := "srun --het-group=" + string(rune('0'+i)) + " --ntasks=1 --chdir=" + shellquote.Quote(wd(i)) + " /bin/sh " + shellquote.Quote(wd(i)+"/"+events.ScriptFile)
		if !strings.Contains(string(script), line) {
			t.Errorf("the job's script lacks %q:\n%s", line, script)
		}
	}
	// A second attempt of the leader adopts the run and submits nothing.
	os.Remove(args)
	again, err := tg.startHet(context.Background(), members)
	if err != nil || again.NativeID != "42+0" || !again.Adopted {
		t.Errorf("second start %+v (%v); want 42+0 adopted", again, err)
	}
	if _, err := os.Stat(args); err == nil {
		t.Error("the second start ran sbatch again")
	}
}

// A follower's component is only a run once the leader's START recorded it.
func TestHetjobFollowerHasNoRunBeforeTheLeader(t *testing.T) {
	tg := &ScriptTarget{Cluster: "hpc", Shells: []Shell{target.Local{}}, Batch: true}
	m := hetMember(t, "b")
	if _, found, err := tg.FindRun(context.Background(), m); found || err != nil {
		t.Errorf("found %v err %v before any start", found, err)
	}
}

// Subjobs on another cluster, a profile without the component template, or one
// subjob alone go the ordinary way.
func TestHetjobOnlyForOneBatchClusterWithTheTemplate(t *testing.T) {
	tg := &ScriptTarget{Cluster: "hpc", Shells: []Shell{target.Local{}}, Batch: true}
	a, b := hetMember(t, "a"), hetMember(t, "b")
	other := hetMember(t, "c")
	other.Incarnation.Cluster = "elsewhere"
	plain := hetMember(t, "d")
	delete(plain.Incarnation.Scripts, events.ScriptStartComponent)
	for name, ms := range map[string][]events.State{"other cluster": {a, other}, "no template": {a, plain}, "alone": {a}} {
		if tg.hetCapable(ms) {
			t.Errorf("%s: capable", name)
		}
	}
	if (&ScriptTarget{Cluster: "hpc", Shells: []Shell{target.Local{}}}).hetCapable([]events.State{a, b}) {
		t.Error("a target that is not a batch system: capable")
	}
}
