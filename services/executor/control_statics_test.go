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
	st := events.State{JobID: events.NewID(), Incarnation: &inc, NativeID: "1"}
	res, err := (&ForkTarget{Cluster: "local"}).Control(context.Background(), st, events.ScriptHold)
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("HOLD: %+v, %v", res, err)
	}
	if data, err := os.ReadFile(out); err != nil || string(data) != "held\n" {
		t.Errorf("the static script wrote %q (%v)", data, err)
	}
}
