package executor

import (
	"context"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gridwire/gridwire/events"
)

// A fork job's environment names its account in LOGNAME, as a login does, so a
// profile's USER_NAME is read there instead of forking id -un for every job.
func TestForkJobSeesLOGNAME(t *testing.T) {
	e := newEnv(t)
	e.run(Config{Cluster: localCluster(), ID: "x1"}, nil)
	inc := newForkJob(t, `printf '%s\n' "$LOGNAME" > logname`)
	id := e.queue(inc)
	waitFile(t, filepath.Join(inc.WorkDir, events.ExitFile))
	u, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	if got := waitFile(t, filepath.Join(inc.WorkDir, "logname")); strings.TrimSpace(got) != u.Username {
		t.Errorf("job %s: LOGNAME %q, want %q", id, got, u.Username)
	}
}

// On a local fork cluster a control script may run a static script: the fork target
// installs the profile's static scripts where BIN puts them before it runs one.
func TestForkControlInstallsStaticScripts(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "bin")
	loc := filepath.Join(bin, "gpe-signal-0123456789abcdef")
	inc := newForkJob(t, "true")
	inc.StaticScripts = map[string]events.Script{"gpe-signal": {Body: "printf '%s\\n' \"$1\" > \"$2\"\n", Location: loc}}
	out := filepath.Join(t.TempDir(), "held")
	inc.Scripts[events.ScriptHold] = events.Script{Body: "/bin/sh " + loc + " held " + out}
	st := events.State{JobID: events.NewID(), Incarnation: &inc, NativeID: "4242"}
	res, err := (&ForkTarget{Cluster: "local"}).Control(context.Background(), st, events.ScriptHold)
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("HOLD: %+v, %v", res, err)
	}
	if data, err := os.ReadFile(out); err != nil || string(data) != "held\n" {
		t.Errorf("the static script wrote %q (%v)", data, err)
	}
}

// A control script is never handed a native ID it could turn against other processes:
// the fork profile's ABORT signals the process group -ID, and an ID of 1 (or -1) would
// signal every process. Such an ID (from an external started event, say) is refused as a
// failed script, and the script does not run.
func TestControlRefusesNativeIDsScriptsMustNotGet(t *testing.T) {
	for _, tc := range []struct {
		id   string
		pids bool
		ok   bool
	}{
		{"4242", true, true}, {"2", true, true}, {"1", true, false}, {"0", true, false}, {"-1", true, false},
		{"-4242", true, false}, {"042", true, false}, {"4242.host", true, false}, {"", true, false},
		{"12345", false, true}, {"12345.pbs-server", false, true}, {"1", false, true},
		{"-1", false, false}, {"1 -1", false, false}, {"1\n", false, false}, {"a\tb", false, false},
	} {
		if err := checkNativeID(tc.id, tc.pids); (err == nil) != tc.ok {
			t.Errorf("native ID %q (process IDs %v): %v", tc.id, tc.pids, err)
		}
	}
	ran := filepath.Join(t.TempDir(), "ran")
	inc := newForkJob(t, "true")
	inc.Scripts[events.ScriptAbort] = events.Script{Body: "echo \"$" + events.VarNativeID + "\" > " + ran}
	for _, id := range []string{"1", "-1"} {
		st := events.State{JobID: events.NewID(), Incarnation: &inc, NativeID: id}
		res, err := (&ForkTarget{Cluster: "local"}).Control(context.Background(), st, events.ScriptAbort)
		if err != nil || res.ExitCode == 0 || !strings.Contains(string(res.Stderr), "not running ABORT: native ID") {
			t.Errorf("ABORT with native ID %q: %+v, %v", id, res, err)
		}
		if _, err := os.Stat(ran); err == nil {
			t.Fatalf("ABORT ran with native ID %q", id)
		}
	}
	st := events.State{JobID: events.NewID(), Incarnation: &inc, NativeID: "4242"}
	if res, err := (&ForkTarget{Cluster: "local"}).Control(context.Background(), st, events.ScriptAbort); err != nil || res.ExitCode != 0 {
		t.Fatalf("ABORT with native ID 4242: %+v, %v", res, err)
	}
	if data, _ := os.ReadFile(ran); string(data) != "4242\n" {
		t.Errorf("ABORT saw native ID %q", data)
	}
}
