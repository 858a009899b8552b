package incarnator

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/pkg/cluster"
	"github.com/gridwire/gridwire/services/incarnator/profile"
)

const fieldsProfile = `<?xml version="1.0"?>
<osp:Profile xmlns:osp="http://gpe.intel.com/osprs/profile" xmlns:idb="http://gpe.intel.com/idb" name="site" extends="slurm">
  <osp:UspaceRoot>/site/uspace</osp:UspaceRoot>
  <idb:Template name="RUN">
    <idb:Invocation name=""><idb:Body><![CDATA[run --threads=<THREADS> --mode=<MODE> --level=<LEVEL> --site=<SITE> --os=<TargetSystemInfo:os_name> --ram=<TargetSystemInfo:ram_size> --gpus=<TargetSystemInfo:gpus> --via=<SSH:HOST>:<SSH:PORT> --user=<USER_NAME> <EXECUTABLE> <ARGUMENTS>]]></idb:Body></idb:Invocation>
    <idb:Field name="THREADS"><idb:Min>1</idb:Min><idb:Max>64</idb:Max><idb:Default>8</idb:Default></idb:Field>
    <idb:Field name="MODE" isSettable="false"><idb:Default>batch</idb:Default></idb:Field>
    <idb:Field name="LEVEL"><idb:Tag name="high">-O3 --fast</idb:Tag><idb:Default>low</idb:Default></idb:Field>
  </idb:Template>
  <osp:Application name="run" template="RUN">
    <osp:ApplicationName>Run</osp:ApplicationName>
    <osp:ApplicationVersion>2.0</osp:ApplicationVersion>
  </osp:Application>
</osp:Profile>
`

func siteCluster() cluster.Cluster {
	return cluster.Cluster{Name: "site", Kind: cluster.KindSSH, Hosts: []string{"gw.site.org:2200"}, User: "grid", Profile: "site", LRMS: "Slurm",
		Queues: []string{"q1"}, Fields: map[string]string{"SITE": "$SITE_ROOT/x"},
		Info: cluster.SystemInfo{OSName: "Linux", RAMSize: 1 << 10, Attributes: map[string]string{"gpus": "2"}}}
}

func TestSpecialAndOperatorFields(t *testing.T) {
	p := mustPlanner(t, testSet(t, map[string]string{"site.xml": fieldsProfile}), siteCluster())
	job := events.Job{ID: "01APP", Executable: "./a.out", Arguments: []string{"x y"}, Application: &events.Application{Name: "Run", Version: "2.0"},
		Fields: map[string]string{"THREADS": "16", "LEVEL": "high"}}
	inc, err := p.Plan(job)
	if err != nil {
		t.Fatal(err)
	}
	want := "run --threads=16 --mode=batch --level=-O3 --fast --site=$SITE_ROOT/x --os=Linux --ram=1024 --gpus=2 --via=gw.site.org:2200 --user=grid ./a.out 'x y'"
	if body := inc.Scripts[events.ScriptJob].Body; !strings.Contains(body, "(\n"+want+"\n)") {
		t.Errorf("JOB does not run\n%s\n%s", want, body)
	}
	if inc.WorkDir != "/site/uspace/01APP" {
		t.Errorf("work dir %q: an ssh cluster with no work_root uses the profile's UspaceRoot", inc.WorkDir)
	}
}

func TestRejections(t *testing.T) {
	p := mustPlanner(t, testSet(t, map[string]string{"site.xml": fieldsProfile}), siteCluster())
	app := &events.Application{Name: "Run"}
	cases := []struct {
		name string
		job  events.Job
		want string
	}{
		{"above max", events.Job{Application: app, Fields: map[string]string{"THREADS": "65"}}, `template RUN: field THREADS: value "65" is out of range (limits 1..64)`},
		{"below min", events.Job{Application: app, Fields: map[string]string{"THREADS": "0"}}, `field THREADS: value "0" is out of range (limits 1..64)`},
		{"not a number", events.Job{Application: app, Fields: map[string]string{"THREADS": "all"}}, `field THREADS: value "all" is not a number (limits 1..64)`},
		{"count above the MPI limit", events.Job{MPI: true, Count: 70000}, `template MPI: field COUNT: value "70000" is out of range (limits 1..65536)`},
		{"not settable", events.Job{Application: app, Fields: map[string]string{"MODE": "interactive"}}, `field MODE: value "interactive" is set by the job, but the field is not settable`},
		{"special field", events.Job{Fields: map[string]string{"WORKING_DIRECTORY": "/"}}, "fields: WORKING_DIRECTORY is a special field"},
		{"special info field", events.Job{Fields: map[string]string{"TargetSystemInfo:os_name": "x"}}, "fields: TargetSystemInfo:os_name is a special field"},
		{"env name", events.Job{Environment: []events.EnvVar{{Name: "A-B", Value: "x"}}}, `environment: variable name "A-B" is not a shell name`},
		{"env name injection", events.Job{Environment: []events.EnvVar{{Name: "A=$(x)", Value: "x"}}}, `is not a shell name`},
		{"env GW_", events.Job{Environment: []events.EnvVar{{Name: "GW_WORKDIR", Value: "/"}}}, `the GW_ prefix is gridwire's own`},
		{"no executable", events.Job{Executable: "-"}, `executable: "-" starts with '-'`},
		{"NUL", events.Job{Arguments: []string{"a\x00b"}}, "NUL byte"},
		{"job id", events.Job{ID: "../../etc"}, `id: "../../etc" is not a job ID`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			job := c.job
			if job.ID == "" {
				job.ID = "01REJ"
			}
			if job.Executable == "" {
				job.Executable = "x"
			}
			_, err := p.Plan(job)
			if !errors.Is(err, ErrRejected) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("got %v\nwant ErrRejected with %q", err, c.want)
			}
		})
	}
}

func TestPlanRecordsWhatRuns(t *testing.T) {
	set := testSet(t, nil)
	root := t.TempDir()
	p := mustPlanner(t, set, slurmCluster(root))
	job := events.Job{ID: "01AUD", Executable: "/opt/{lrms}/bin/app", Arguments: []string{"--queue={queue}", "{taskid}.out", "{other}"},
		Environment: []events.EnvVar{{Name: "OUT", Value: "/data/{taskid}"}}, StageOut: []events.FileCopy{{From: "r.txt", To: "gsiftp://h/out/{taskid}/r.txt"}}}
	inc, err := p.Plan(job)
	if err != nil {
		t.Fatal(err)
	}
	if inc.ProfileHash != set.Hash || inc.Profile != "slurm" || inc.Cluster != "hpc" || inc.Queue != "batch" || inc.LRMS != "Slurm" {
		t.Errorf("plan %+v", inc)
	}
	for _, name := range []string{"JOB", "START", "ABORT", "HOLD", "RESUME", "GET_JOB_STATUS", "DELETE", "LIST:FILE", "LIST:DIR"} {
		s, ok := inc.Scripts[name]
		if !ok || s.Body == "" || s.SHA256 != script(s.Body).SHA256 {
			t.Errorf("script %s: %+v", name, s)
		}
	}
	if inc.NativeIDPattern == "" || inc.StatusPattern == "" || inc.NativeStates["PENDING"] != NativeQueued || inc.AbsentState != NativeEnded {
		t.Errorf("watch fields %q %q %v %q", inc.NativeIDPattern, inc.StatusPattern, inc.NativeStates, inc.AbsentState)
	}
	body := inc.Scripts[events.ScriptJob].Body
	for _, want := range []string{"exec /opt/Slurm/bin/app '--queue=batch' 01AUD.out '{other}'", "export OUT=/data/01AUD", "(" + set.Hash + ")"} {
		if !strings.Contains(body, want) {
			t.Errorf("JOB lacks %q:\n%s", want, body)
		}
	}
	wantSub := map[string]string{"executable": "/opt/Slurm/bin/app", "arguments.0": "--queue=batch", "arguments.1": "01AUD.out",
		"environment.OUT": "/data/01AUD", "stage_out.0.to": "gsiftp://h/out/01AUD/r.txt"}
	if len(inc.Substituted) != len(wantSub) {
		t.Errorf("substituted %v", inc.Substituted)
	}
	for k, v := range wantSub {
		if inc.Substituted[k] != v {
			t.Errorf("substituted[%s] = %q, want %q", k, inc.Substituted[k], v)
		}
	}
	// The same job renders the same bytes: an auditor can re-render and compare.
	again, _ := p.Plan(job)
	for name, s := range inc.Scripts {
		if again.Scripts[name].SHA256 != s.SHA256 {
			t.Errorf("%s differs between two renders of one job", name)
		}
	}
}

func TestNewPlannerChecksClusters(t *testing.T) {
	set := testSet(t, nil)
	cases := []struct {
		cl   cluster.Cluster
		want string
	}{
		{cluster.Cluster{Name: "a", Kind: "fork", Profile: "nope"}, `clusters[0].profile: cluster a: profile "nope" is not in the profile set (fork, linux, pbs, slurm)`},
		{cluster.Cluster{Name: "b", Kind: "fork", Profile: "linux"}, `clusters[0].profile: cluster b: profile "linux" cannot run jobs`},
	}
	for _, c := range cases {
		_, err := NewPlanner(cluster.Config{Clusters: []cluster.Cluster{c.cl}}, set, "/w")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("got %v, want %q", err, c.want)
		}
	}
	p, err := NewPlanner(cluster.Default(), set, "/data/jobs")
	if err != nil {
		t.Fatal(err)
	}
	inc, _ := p.Plan(events.Job{ID: "01D", Executable: "true"})
	if inc.WorkDir != "/data/jobs/01D" {
		t.Errorf("a fork cluster with no work_root uses the planner's: %q", inc.WorkDir)
	}
}

func TestCheckProfilesReportsWatcherFields(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"linux.xml"} {
		data, _ := os.ReadFile(filepath.Join("profiles", name))
		os.WriteFile(filepath.Join(dir, name), data, 0o600)
	}
	bad := `<?xml version="1.0"?>
<Profile name="bad" extends="linux">
<Template name="START"><Invocation><Body>x</Body></Invocation>
  <Field name="NATIVE_ID_PATTERN"><Value>(?=x)</Value></Field></Template>
<Template name="GET_JOB_STATUS"><Invocation><Body>x</Body></Invocation>
  <Field name="STATUS_PATTERN"><Value>(\d+) (\w+)</Value></Field>
  <Field name="STATE"><Tag name="R">RUNNING</Tag><Tag name="Z">DEAD</Tag></Field>
</Template>
<Template name="HOLD"><Invocation><Body>x</Body></Invocation></Template>
<Template name="RESUME"><Invocation><Body>x</Body></Invocation></Template>
</Profile>
`
	os.WriteFile(filepath.Join(dir, "bad.xml"), []byte(bad), 0o600)
	err := CheckProfiles(dir)
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{
		dir + `/bad.xml:2:1: Template: profile "bad" has no template ABORT`,
		dir + `/bad.xml:4:3: NATIVE_ID_PATTERN: profile: regular expression not expressible in RE2: "(?=x)": lookahead`,
		dir + `/bad.xml:6:3: STATUS_PATTERN: "(\\d+) (\\w+)" needs the named groups (?<id>...) and (?<state>...)`,
		dir + `/bad.xml:7:3: STATE: tag Z maps to "DEAD", not QUEUED, RUNNING, HELD or ENDED`,
		dir + `/bad.xml:5:1: GET_JOB_STATUS: profile "bad": template GET_JOB_STATUS has no field ABSENT_STATE`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("missing\n%s\nin\n%v", want, err)
		}
	}
	var pe *profile.Error
	if !errors.As(err, &pe) {
		t.Error("errors are not profile.Errors")
	}
}

// TestPlanConcurrently: the service plans with many workers on one planner (run with
// -race to check it shares nothing mutable).
func TestPlanConcurrently(t *testing.T) {
	p := mustPlanner(t, testSet(t, nil), matchClusters()...)
	want, err := p.Plan(events.Job{ID: "01SAME", Executable: "x", Requirements: events.Requirements{LRMS: []events.LRMSRule{{Is: "slurm"}}}, Count: 2})
	if err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 8)
	for w := 0; w < 8; w++ {
		go func() {
			for i := 0; i < 50; i++ {
				got, err := p.Plan(events.Job{ID: "01SAME", Executable: "x", Requirements: events.Requirements{LRMS: []events.LRMSRule{{Is: "slurm"}}}, Count: 2})
				if err == nil && got.Scripts[events.ScriptStart].SHA256 != want.Scripts[events.ScriptStart].SHA256 {
					err = errors.New("START differs between concurrent renders")
				}
				if err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for w := 0; w < 8; w++ {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}

func TestStagedExecutableRunsFromTheWorkingDirectory(t *testing.T) {
	p := mustPlanner(t, testSet(t, nil), forkCluster("/w"))
	cases := map[string]events.Job{
		"exec ./hello.sh 1": {Executable: "hello.sh", Arguments: []string{"1"}, StageIn: []events.FileCopy{{From: "gsiftp://h/hello.sh", To: "hello.sh"}}},
		"exec ./t-01X.sh":   {Executable: "t-{taskid}.sh", StageIn: []events.FileCopy{{From: "http://h/t.sh", To: "./t-{taskid}.sh"}}},
		"exec echo":         {Executable: "echo", StageIn: []events.FileCopy{{From: "http://h/x", To: "other"}}},
		"exec bin/app":      {Executable: "bin/app", StageIn: []events.FileCopy{{From: "http://h/bin/", To: "bin", Directory: true}}},
	}
	for want, job := range cases {
		job.ID = "01X"
		inc, err := p.Plan(job)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(inc.Scripts[events.ScriptJob].Body, "(\n"+want+"\n)") {
			t.Errorf("JOB does not run %q:\n%s", want, inc.Scripts[events.ScriptJob].Body)
		}
	}
}
