package incarnator

import (
	"errors"
	"os"
	"os/user"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/gridwire/gridwire/events"
)

// TestReservedNamesFilledOnTheTarget: JRDL's reserved substitution names reach the
// program filled with the target's values (its HOME, login name, the job's ID, the
// host's OS), in the executable's arguments, the environment and the directory. Before,
// the program saw "{HOME}" literally.
func TestReservedNamesFilledOnTheTarget(t *testing.T) {
	home := os.Getenv("HOME") // runScript hands the test's HOME to the job
	if home == "" {
		t.Fatal("HOME is not set")
	}
	me, _ := user.Current()
	job := events.Job{ID: "01RESERVED", Executable: "/bin/sh", Directory: "{HOME}",
		Arguments:     []string{"-c", `printf '%s|%s|%s|%s\n' "$1" "$2" "$OS" "$PWD"`, "x", "{HOME}/a 'b' $(no)", "{JOBID}-{LOGNAME}"},
		Environment:   []events.EnvVar{{Name: "OS", Value: "os={GLOBUS_HOST_OSNAME}"}},
		Substitutions: []string{"HOME", "JOBID", "LOGNAME", "GLOBUS_HOST_OSNAME"}}
	got, inc := runForkJob(t, job)
	if got != "0\n" {
		t.Fatalf("exit status %q", got)
	}
	out, _ := os.ReadFile(filepath.Join(inc.WorkDir, events.StdoutFile))
	osName := map[string]string{"linux": "Linux", "darwin": "Darwin"}[runtime.GOOS]
	want := home + "/a 'b' $(no)|01RESERVED-" + me.Username + "|os=" + osName + "|" + home + "\n"
	if string(out) != want {
		t.Errorf("the program saw %q, want %q", out, want)
	}
	p := mustPlanner(t, testSet(t, nil), forkCluster(t.TempDir()))
	_, err := p.Plan(events.Job{ID: "01GASS", Executable: "x", Arguments: []string{"{GLOBUSRUN_GASS_URL}"}, Substitutions: []string{"GLOBUSRUN_GASS_URL"}})
	if !errors.Is(err, ErrRejected) || !strings.Contains(err.Error(), "GASS") {
		t.Errorf("GLOBUSRUN_GASS_URL: %v", err)
	}
	_, err = p.Plan(events.Job{ID: "01MPI", Executable: "{HOME}/a.out", MPI: true, Count: 2, Substitutions: []string{"HOME"}})
	if !errors.Is(err, ErrRejected) || !strings.Contains(err.Error(), "reserved substitution") {
		t.Errorf("an MPI executable with {HOME}: %v", err)
	}
}

// TestDDSLocationFilledOnTheTarget: a DDS task's DDS_LOCATION ({dds_location} from
// ingest) is the job's working directory when the account has no DDS_LOCATION of its own.
func TestDDSLocationFilledOnTheTarget(t *testing.T) {
	t.Setenv("DDS_LOCATION", "")
	job := events.Job{ID: "01DDSLOC", Executable: "/bin/sh",
		Arguments:     []string{"-c", `printf '%s\n' "$DDS_LOCATION"`},
		Environment:   []events.EnvVar{{Name: "DDS_LOCATION", Value: "{dds_location}"}},
		Substitutions: []string{"session", "dds_location"}}
	got, inc := runForkJob(t, job)
	if got != "0\n" {
		t.Fatalf("exit status %q", got)
	}
	out, _ := os.ReadFile(filepath.Join(inc.WorkDir, events.StdoutFile))
	if string(out) != inc.WorkDir+"\n" {
		t.Errorf("DDS_LOCATION %q, want the working directory %q", out, inc.WorkDir)
	}
}
