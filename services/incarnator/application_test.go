package incarnator

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gridwire/gridwire/events"
)

// appProfile has an application whose template has a default and a "debug" variation
// (the spec's example of a variation), a field mapped through tags, a field within
// limits and a field the job may not set.
const appProfile = `<?xml version="1.0"?>
<osp:Profile xmlns:osp="http://gpe.intel.com/osprs/profile" xmlns:idb="http://gpe.intel.com/idb" name="apps" extends="fork">
  <idb:Template name="RENDER">
    <idb:Invocation name=""><idb:Body><![CDATA[printf '%s\n' "mode=normal quality=<QUALITY> aa=<ANTIALIAS> site=<SITE>" <ARGUMENTS> > result]]></idb:Body></idb:Invocation>
    <idb:Invocation name="debug"><idb:Body><![CDATA[printf '%s\n' "mode=debug quality=<QUALITY> aa=<ANTIALIAS> site=<SITE>" <ARGUMENTS> > result]]></idb:Body></idb:Invocation>
    <idb:Field name="QUALITY"><idb:Tag name="low">1</idb:Tag><idb:Tag name="high">9</idb:Tag><idb:Default>low</idb:Default></idb:Field>
    <idb:Field name="ANTIALIAS"><idb:Min>0</idb:Min><idb:Max>1</idb:Max><idb:Default>0.1</idb:Default></idb:Field>
    <idb:Field name="SITE" isSettable="false"><idb:Default>hpc</idb:Default></idb:Field>
  </idb:Template>
  <osp:Application name="render" template="RENDER">
    <osp:ApplicationName>render</osp:ApplicationName>
    <osp:ApplicationVersion>2.0</osp:ApplicationVersion>
  </osp:Application>
</osp:Profile>`

// A job names the profile's application, one variation of its template and values for
// its settable fields; the JOB script runs that variation with the tag-mapped and
// limit-checked values. Asking for what the profile does not have, or setting what it
// does not let a job set, is refused naming the part.
func TestJobChoosesApplicationVariationAndFields(t *testing.T) {
	cl := forkCluster(t.TempDir())
	cl.Profile = "apps"
	p := mustPlanner(t, testSet(t, map[string]string{"apps.xml": appProfile}), cl)
	run := func(job events.Job) string {
		t.Helper()
		inc, err := p.Plan(job)
		if err != nil {
			t.Fatal(err)
		}
		writeJob(t, inc)
		vars := map[string]string{events.VarWorkDir: inc.WorkDir, events.VarJobID: job.ID}
		if out, err := runScript(t, "/bin/sh", inc.Scripts[events.ScriptStart].Body, vars, ""); err != nil {
			t.Fatalf("START: %v: %s", err, out)
		}
		if got := waitFile(t, filepath.Join(inc.WorkDir, events.ExitFile)); got != "0\n" {
			t.Fatalf("exit %q", got)
		}
		data, err := os.ReadFile(filepath.Join(inc.WorkDir, "result"))
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}
	app := &events.Application{Name: "render", Version: "2.0"}
	for _, tc := range []struct {
		job  events.Job
		want string
	}{
		{events.Job{ID: "01DEFAULT", Executable: "x", Application: app},
			"mode=normal quality=1 aa=0.1 site=hpc\n"},
		{events.Job{ID: "01DEBUG", Executable: "x", Arguments: []string{"a b", "$(touch pwned)"},
			Application: &events.Application{Name: "render", Variation: "debug"},
			Fields:      map[string]string{"QUALITY": "high", "ANTIALIAS": "0.75"}},
			"mode=debug quality=9 aa=0.75 site=hpc\na b\n$(touch pwned)\n"},
		{events.Job{ID: "01HOSTILE", Executable: "x", Application: app,
			Fields: map[string]string{"QUALITY": `'; touch pwned; '`}},
			"mode=normal quality='; touch pwned; ' aa=0.1 site=hpc\n"},
	} {
		if got := run(tc.job); got != tc.want {
			t.Errorf("%s: got %q, want %q", tc.job.ID, got, tc.want)
		}
	}
	for _, tc := range []struct {
		job  events.Job
		want string
	}{
		{events.Job{ID: "01NOVAR", Executable: "x", Application: &events.Application{Name: "render", Variation: "fast"}},
			`template RENDER in profile apps has no variation "fast"`},
		{events.Job{ID: "01NOAPP", Executable: "x", Application: &events.Application{Name: "povray"}},
			"profile apps has no application povray"},
		{events.Job{ID: "01RANGE", Executable: "x", Application: app, Fields: map[string]string{"ANTIALIAS": "2"}},
			`field ANTIALIAS: value "2" is out of range (limits 0..1)`},
		{events.Job{ID: "01FIXED", Executable: "x", Application: app, Fields: map[string]string{"SITE": "other"}},
			"field SITE: value \"other\" is set by the job, but the field is not settable"},
		{events.Job{ID: "01TYPO", Executable: "x", Application: app, Fields: map[string]string{"QUALTY": "high"}},
			"profile apps has no template with a field QUALTY"},
	} {
		_, err := p.Plan(tc.job)
		var nm *NoMatchError
		if !errors.As(err, &nm) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want a refusal saying %q", tc.job.ID, err, tc.want)
		}
	}
	if m, _ := filepath.Glob(filepath.Join(cl.WorkRoot, "*", "pwned")); len(m) > 0 {
		t.Errorf("a job value ran as a command: %v", m)
	}
}
