package executor

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/pkg/target"
)

func ddsState(id string, inc events.IncarnatedData, props bool) events.State {
	j := &events.Job{ID: id, Parent: events.NewID(), DDS: &events.DDSContext{TaskPath: "main/t_0"}}
	if props {
		j.DDS.Properties = []events.DDSProperty{{Name: "peer", Access: "read"}}
	}
	return events.State{JobID: id, Job: j, Incarnation: &inc}
}

// A fork task with properties gets the API's loopback address and its own credential
// in its environment; a task without gets neither.
func TestForkTaskGetsThePropertyAPI(t *testing.T) {
	props := &Properties{Addr: "0.0.0.0:8123", Credential: func(id string) string { return "tok'$(x)-" + id }}
	f := &ForkTarget{Cluster: "local", Properties: props}
	got := map[bool]string{}
	for _, with := range []bool{true, false} {
		wd := filepath.Join(t.TempDir(), events.NewID())
		if err := os.MkdirAll(filepath.Join(wd, events.ControlDir), 0o700); err != nil {
			t.Fatal(err)
		}
		st := ddsState(filepath.Base(wd), forkIncarnation("local", wd, `env > env.tmp && mv env.tmp env.out`), with)
		if _, err := f.Start(context.Background(), st); err != nil {
			t.Fatal(err)
		}
		got[with] = waitFile(t, filepath.Join(wd, "env.out"))
		if with && (!strings.Contains(got[with], "\n"+events.VarPropertyURL+"=http://127.0.0.1:8123\n") ||
			!strings.Contains(got[with], "\n"+events.VarPropertyToken+"=tok'$(x)-"+st.JobID+"\n")) {
			t.Fatalf("the task's environment lacks the API:\n%s", got[with])
		}
	}
	if strings.Contains(got[false], "GRIDWIRE_PROPERTY") {
		t.Fatalf("a task without properties got the API:\n%s", got[false])
	}
}

// One start script starting several jobs gives each its own credential, quoted, and none
// another's.
func TestStartScriptGivesEachJobItsOwnCredential(t *testing.T) {
	s := &ScriptTarget{Cluster: "hpc"}
	var jobs []startJob
	for _, tok := range []string{"a'b $(touch pwned)", "", "c"} {
		wd := filepath.Join(t.TempDir(), "job")
		j := startJob{id: events.NewID(), workDir: wd, start: `env > "$GW_WORKDIR"/env.out; echo 1`, body: "true"}
		if tok != "" {
			j.env = []events.EnvVar{{Name: events.VarPropertyURL, Value: "http://127.0.0.1:1"}, {Name: events.VarPropertyToken, Value: tok}}
		}
		if err := os.MkdirAll(wd, 0o700); err != nil {
			t.Fatal(err)
		}
		jobs = append(jobs, j)
	}
	out, err := target.Local{}.Feed(context.Background(), s.startScript(newNonce(), jobs))
	if err != nil || out.ExitCode != 0 {
		t.Fatalf("start script: %v %s", err, out.Describe())
	}
	for i, want := range []string{"a'b $(touch pwned)", "", "c"} {
		env, err := os.ReadFile(filepath.Join(jobs[i].workDir, "env.out"))
		if err != nil {
			t.Fatal(err)
		}
		has := strings.Contains(string(env), events.VarPropertyToken+"=")
		if want == "" && has || want != "" && !strings.Contains(string(env), "\n"+events.VarPropertyToken+"="+want+"\n") {
			t.Errorf("job %d's environment, want token %q:\n%s", i, want, env)
		}
	}
	if _, err := os.Stat("pwned"); err == nil {
		t.Fatal("a credential ran as shell")
	}
}

// A task is given the address its host dials: loopback on this host, this host's name
// for a batch system's node when the gateway listens on every address.
func TestPropertyAddressByWhereTheTaskRuns(t *testing.T) {
	host, _ := os.Hostname()
	for _, c := range []struct {
		addr  string
		batch bool
		want  string
	}{
		{"0.0.0.0:8080", false, "http://127.0.0.1:8080"},
		{"[::]:8080", false, "http://[::1]:8080"},
		{"127.0.0.1:8080", false, "http://127.0.0.1:8080"},
		{"0.0.0.0:8080", true, "http://" + host + ":8080"},
		{"10.1.2.3:8080", true, "http://10.1.2.3:8080"},
	} {
		p := &Properties{Addr: c.addr, Credential: func(string) string { return "t" }}
		env, err := p.env(context.Background(), ddsState(events.NewID(), events.IncarnatedData{}, true), target.Local{}, c.batch)
		if err != nil || len(env) != 2 || env[0].Value != c.want {
			t.Errorf("%s (batch %v): %v %v, want %s", c.addr, c.batch, env, err, c.want)
		}
	}
}
