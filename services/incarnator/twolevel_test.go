package incarnator

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gridwire/gridwire/events"
)

// twoLevelProfile uses the spec's two-level replacement on values only the target knows:
// the job's working directory without its last component (its parent, the work root),
// and the job ID with its leading "01" replaced.
const twoLevelProfile = `<?xml version="1.0"?>
<osp:Profile xmlns:osp="http://gpe.intel.com/osprs/profile" xmlns:idb="http://gpe.intel.com/idb" name="twolevel" extends="fork">
  <idb:Template name="JOB_PROLOGUE">
    <idb:Invocation name=""><idb:Body><![CDATA[
cd <WORKING_DIRECTORY> || exit 111
printf '%s\n' <WORKING_DIRECTORY/\/[^\/]*$/> > parent
printf '%s\n' "id=<JOB_ID/^01/XX>" > id
printf '%s\n' '<JOB_SCRIPT/^.*\/(\.\w+)\/(\w+)\.sh$/$2 in $1>' > script
]]></idb:Body></idb:Invocation>
  </idb:Template>
</osp:Profile>`

// A two-level replacement on a run-time value is applied to the value on the target,
// not to the text of the shell expansion that stands for it; a work root full of shell
// syntax arrives as data.
func TestTwoLevelReplacementOnRunTimeValues(t *testing.T) {
	root := filepath.Join(t.TempDir(), `a b'$(touch pwned)"`)
	if err := os.MkdirAll(root, 0o700); err != nil {
		t.Fatal(err)
	}
	cl := forkCluster(root)
	cl.Profile = "twolevel"
	p := mustPlanner(t, testSet(t, map[string]string{"twolevel.xml": twoLevelProfile}), cl)
	job := events.Job{ID: "01TWOLEVEL01", Executable: "/bin/true"}
	inc, err := p.Plan(job)
	if err != nil {
		t.Fatal(err)
	}
	writeJob(t, inc)
	vars := map[string]string{events.VarWorkDir: inc.WorkDir, events.VarJobID: job.ID}
	if out, err := runScript(t, "/bin/sh", inc.Scripts[events.ScriptStart].Body, vars, ""); err != nil {
		t.Fatalf("START: %v: %s", err, out)
	}
	waitFile(t, filepath.Join(inc.WorkDir, events.ExitFile))
	for file, want := range map[string]string{"parent": root, "id": "id=XXTWOLEVEL01", "script": "job in .gridwire"} {
		data, err := os.ReadFile(filepath.Join(inc.WorkDir, file))
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.TrimSuffix(string(data), "\n"); got != want {
			t.Errorf("%s: got %q, want %q", file, got, want)
		}
	}
	for _, dir := range []string{root, inc.WorkDir, "."} {
		if _, err := os.Stat(filepath.Join(dir, "pwned")); err == nil {
			t.Errorf("the work root's name ran as a command in %s", dir)
		}
	}
}

// A two-level replacement on a run-time value whose pattern sed cannot apply as Java
// would is a load error naming the place, the replacement and the construct.
func TestRunTimeTwoLevelReplacementSedCannotApplyIsALoadError(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "alt.xml"), []byte(`<?xml version="1.0"?>
<osp:Profile xmlns:osp="http://gpe.intel.com/osprs/profile" xmlns:idb="http://gpe.intel.com/idb" name="alt" extends="fork">
  <idb:Template name="ABORT">
    <idb:Invocation name=""><idb:Body><![CDATA[kill <NATIVE_ID/^(pid|job)-/>]]></idb:Body></idb:Invocation>
  </idb:Template>
</osp:Profile>`), 0o600)
	for _, name := range []string{"linux.xml", "fork.xml"} {
		data, _ := builtinProfiles.ReadFile("profiles/" + name)
		os.WriteFile(filepath.Join(dir, name), data, 0o600)
	}
	err := CheckProfiles(dir)
	if err == nil || !strings.Contains(err.Error(), "alt.xml:4:") || !strings.Contains(err.Error(), "<NATIVE_ID/^(pid|job)-/>") ||
		!strings.Contains(err.Error(), "alternation") {
		t.Errorf("got %v", err)
	}
}
