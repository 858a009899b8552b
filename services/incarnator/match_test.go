package incarnator

import (
	"errors"
	"strings"
	"testing"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/pkg/cluster"
)

func matchClusters() []cluster.Cluster {
	return []cluster.Cluster{
		{Name: "local", Kind: cluster.KindFork, Profile: "fork", LRMS: "Fork", WorkRoot: "/w"},
		{Name: "hpc", Kind: cluster.KindSSH, Hosts: []string{"login1.hpc.example.org:2222", "login2.hpc.example.org"}, Profile: "slurm", LRMS: "Slurm",
			Queues: []string{"batch", "debug"}, WorkRoot: "/scratch",
			Info: cluster.SystemInfo{OSName: "Linux", OSRelease: "5.14.0-362.el9.x86_64", OSVersion: "Rocky 9.3", Platform: "x86_64",
				CPUInstructionSet: "x86_64-avx512", CPUHz: 2_600_000_000, SMPSize: 64, RAMSize: 256 << 10, VirtualSize: 512 << 10,
				Software: []cluster.Software{{Name: "mvapich", Version: "2.3.7"}, {Name: "abinit", Version: "9.10.3"}, {Name: "orca", Version: "2.6.35"}, {Name: "gcc", Version: "11.4.1"}, {Name: "gcc", Version: "13.2.0"}},
				Attributes: map[string]string{"ram_available": "100000", "storage_available": "5000", "free_cpu": "32",
					"availability_15min": "60", "scheduling_plugin": "Default", "gpus": "4"}}},
		{Name: "old", Kind: cluster.KindSSH, Hosts: []string{"pbs.example.org"}, Profile: "pbs", LRMS: "PBS", Queues: []string{"workq"}, WorkRoot: "/home",
			Info: cluster.SystemInfo{OSName: "Linux", OSRelease: "3.10.0", Platform: "ppc64le", CPUHz: 1_000_000_000, SMPSize: 8, RAMSize: 16 << 10,
				Software: []cluster.Software{{Name: "abinit", Version: "6.0"}}}},
	}
}

// TestMatching builds canonical jobs directly: the matcher sees the requirements in the
// gateway's own terms, whatever language they were written in. The comments name what
// each case stands for in a description language; ingest's tests show each language
// turning into these fields.
func TestMatching(t *testing.T) {
	p := mustPlanner(t, testSet(t, nil), matchClusters()...)
	glob := func(ps ...string) []events.NameRequirement {
		n := events.NameRequirement{}
		for _, p := range ps {
			n.AnyOf = append(n.AnyOf, events.NamePattern{Pattern: p})
		}
		return []events.NameRequirement{n}
	}
	re := func(p string) []events.NameRequirement {
		return []events.NameRequirement{{AnyOf: []events.NamePattern{{Pattern: p, Syntax: events.SyntaxRegexp}}}}
	}
	is := func(l string) []events.LRMSRule { return []events.LRMSRule{{Is: l}} }
	isNot := func(l string) []events.LRMSRule { return []events.LRMSRule{{IsNot: l}} }
	least := func(name string, n float64) []events.AttributeRequirement {
		return []events.AttributeRequirement{{Name: name, AtLeast: &n}}
	}
	cases := []struct {
		name  string
		req   events.Requirements
		app   *events.Application
		want  string // chosen cluster, or "" for no match
		queue string
	}{
		{name: "anything goes to the first", want: "local"},
		{name: "batch default skips Fork (v3 without fork)", req: events.Requirements{LRMSDefault: events.LRMSBatch}, want: "hpc", queue: "batch"},
		{name: "batch default, Fork named", req: events.Requirements{LRMSDefault: events.LRMSBatch, LRMS: is("fork")}, want: "local"},
		{name: "any LRMS (v3 fork: true)", req: events.Requirements{}, want: "local"},
		{name: "not Fork (fork: false, schedulingType scheduler)", req: events.Requirements{LRMS: isNot("Fork")}, want: "hpc"},
		{name: "lrms", req: events.Requirements{LRMS: is("PBS")}, want: "old", queue: "workq"},
		{name: "lrms unknown", req: events.Requirements{LRMS: is("Cleo")}},
		{name: "lrms is Fork (schedulingType fork)", req: events.Requirements{LRMS: is("Fork")}, want: "local"},
		{name: "lrms pbs (jobManagerType)", req: events.Requirements{LRMS: is("pbs")}, want: "old"},
		{name: "lrms rules conflict", req: events.Requirements{LRMS: append(is("pbs"), isNot("PBS")...)}},
		{name: "hostname", req: events.Requirements{Hosts: glob("pbs.example.org")}, want: "old"},
		{name: "hostname, any of", req: events.Requirements{Hosts: glob("elsewhere", "pbs.example.org")}, want: "old"},
		{name: "hostname wildcard", req: events.Requirements{Hosts: glob("login?.HPC.example.*")}, want: "hpc"},
		{name: "hostname none", req: events.Requirements{Hosts: glob("elsewhere")}},
		{name: "hosts, every entry", req: events.Requirements{Hosts: append(glob("login1.*"), glob("pbs.*")...)}},
		{name: "host regexp (DDS hostname)", req: events.Requirements{Hosts: re(`login\d\.hpc\..*`)}, want: "hpc"},
		{name: "host regexp, the spec's +.gsi.de form read as .+", req: events.Requirements{Hosts: re(`.+.example.org`)}, want: "hpc"},
		{name: "host regexp, the full name", req: events.Requirements{Hosts: re("PBS.example.org")}, want: "old"},
		{name: "host regexp invalid, not a name", req: events.Requirements{Hosts: re("(")}},
		{name: "target name (DDS wnname)", req: events.Requirements{Targets: re("ol.*")}, want: "old"},
		{name: "target name glob", req: events.Requirements{Targets: glob("H?C")}, want: "hpc"},
		{name: "queue", req: events.Requirements{Queue: "debug"}, want: "hpc", queue: "debug"},
		{name: "queue none", req: events.Requirements{Queue: "gpu"}},
		{name: "os_name wildcard, case", req: events.Requirements{OSName: "lin*", OSRelease: "5.*.el?.x86_64"}, want: "hpc"},
		{name: "os_name (JRDL operatingSystem)", req: events.Requirements{OSName: "Linux"}, want: "hpc"},
		{name: "os_version", req: events.Requirements{OSVersion: "Rocky 9*"}, want: "hpc"},
		{name: "platform", req: events.Requirements{Platform: "ppc64??"}, want: "old"},
		{name: "cpu_instruction_set", req: events.Requirements{CPUInstructionSet: "*avx512"}, want: "hpc"},
		{name: "cpu_instruction_set unreported", req: events.Requirements{CPUInstructionSet: "*", LRMS: is("PBS")}},
		{name: "smp_size bound", req: events.Requirements{SMPSize: 64}, want: "hpc"},
		{name: "smp_size too big", req: events.Requirements{SMPSize: 65}},
		{name: "ram_size (v3 MB, JRDL minRAMSize MB)", req: events.Requirements{RAMSize: 17 << 10}, want: "hpc"},
		{name: "ram_size too big", req: events.Requirements{RAMSize: 512 << 10}},
		{name: "virtual_size", req: events.Requirements{VirtualSize: 1 << 40}},
		{name: "cpu_hz (JRDL clockSpeed in MHz, scaled)", req: events.Requirements{CPUHz: 2_000_000_000}, want: "hpc"},
		{name: "processors from cpus or smp_size × hosts", req: events.Requirements{Processors: 100, LRMS: is("PBS")}},
		{name: "processors fit", req: events.Requirements{Processors: 128, LRMS: is("Slurm")}, want: "hpc"},
		{name: "software by name", req: events.Requirements{Software: []events.SoftwareConstraint{{Name: "abinit"}}}, want: "hpc"},
		{name: "software > version", req: events.Requirements{Software: []events.SoftwareConstraint{{Name: "mvapich"}, {Name: "abinit", Op: ">", Version: "6"}, {Name: "orca", Op: "==", Version: "2.6.35"}}}, want: "hpc"},
		{name: "software <= picks the old one", req: events.Requirements{Software: []events.SoftwareConstraint{{Name: "abinit", Op: "<=", Version: "6.0.0"}}}, want: "old"},
		{name: "software == 6 is 6.0 (missing components are zeros)", req: events.Requirements{Software: []events.SoftwareConstraint{{Name: "abinit", Op: "==", Version: "6"}}}, want: "old"},
		{name: "software 6.0 does not satisfy > 6", req: events.Requirements{Software: []events.SoftwareConstraint{{Name: "abinit", Op: ">", Version: "6"}}, Platform: "ppc64*"}},
		{name: "software < none", req: events.Requirements{Software: []events.SoftwareConstraint{{Name: "abinit", Op: "<", Version: "6"}}}},
		{name: "software any installed version", req: events.Requirements{Software: []events.SoftwareConstraint{{Name: "gcc", Op: ">=", Version: "13"}}}, want: "hpc"},
		{name: "software missing", req: events.Requirements{Software: []events.SoftwareConstraint{{Name: "matlab"}}}},
		{name: "attribute bound (minRAMAvailable)", req: events.Requirements{Attributes: least("ram_available", 1000)}, want: "hpc"},
		{name: "attribute bound too much (minStorageAvailable)", req: events.Requirements{Attributes: least("storage_available", 9000)}},
		{name: "attribute bounds (minFreeCPU, last15Min)", req: events.Requirements{Attributes: append(least("free_cpu", 4), least("availability_15min", 10)...)}, want: "hpc"},
		{name: "attribute pattern (schedulingPlugin)", req: events.Requirements{Attributes: []events.AttributeRequirement{{Name: "scheduling_plugin", Pattern: "def*"}}}, want: "hpc"},
		{name: "attribute name in the config's spelling", req: events.Requirements{Attributes: least("RAM-Available", 1)}, want: "hpc"},
		{name: "attribute gpus (DDS gpu)", req: events.Requirements{Attributes: least("gpus", 2)}, want: "hpc"},
		{name: "attribute gpus too many", req: events.Requirements{Attributes: least("gpus", 5)}},
		{name: "attribute not a number", req: events.Requirements{Attributes: least("scheduling_plugin", 1)}},
		{name: "unsupported", req: events.Requirements{Unsupported: []events.UnsupportedRequirement{{What: "type groupname is not supported"}}}},
		{name: "application", app: &events.Application{Name: "MPI", Version: "generic"}, want: "local"},
		{name: "application unknown", app: &events.Application{Name: "POVRay"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			job := events.Job{ID: "01M", Executable: "x", Requirements: c.req, Application: c.app}
			inc, err := p.Plan(job)
			if c.want == "" {
				var nm *NoMatchError
				if !errors.As(err, &nm) || len(nm.Excluded) != 3 || nm.Job != "01M" {
					t.Fatalf("got %+v, %v; want a no-match naming all three clusters", inc.Cluster, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if inc.Cluster != c.want || c.queue != "" && inc.Queue != c.queue {
				t.Errorf("cluster %q queue %q, want %q %q", inc.Cluster, inc.Queue, c.want, c.queue)
			}
		})
	}
}

// TestMatchingIgnoresTheLanguage: the original format and the language's own context
// make no difference to placement; only the canonical requirements do.
func TestMatchingIgnoresTheLanguage(t *testing.T) {
	p := mustPlanner(t, testSet(t, nil), matchClusters()...)
	for _, format := range []string{"", "v3-json", "v3-yaml", "jrdl", "dds", "a fifth language"} {
		job := events.Job{ID: "01L", Executable: "x", Original: events.Original{Format: format},
			DDS: &events.DDSContext{Requirements: []events.DDSRequirement{{Type: "hostname", Value: "nowhere"}}}}
		inc, err := p.Plan(job)
		if err != nil || inc.Cluster != "local" {
			t.Errorf("format %q: got %q, %v; want local", format, inc.Cluster, err)
		}
	}
}

func TestNoMatchSaysWhyPerCluster(t *testing.T) {
	p := mustPlanner(t, testSet(t, nil), matchClusters()...)
	req := events.Requirements{LRMSDefault: events.LRMSBatch, Queue: "debug", OSName: "Linux",
		Software: []events.SoftwareConstraint{{Name: "abinit", Op: ">", Version: "10", From: events.Origin{Field: "requirements.software", Line: 7}}}}
	req.SetOrigin("lrms_default", events.Origin{Field: "requirements.fork (not set)"})
	req.SetOrigin("queue", events.Origin{Field: "requirements.queue", Line: 4})
	_, err := p.Plan(events.Job{ID: "01N", Executable: "x", Requirements: req})
	var nm *NoMatchError
	if !errors.As(err, &nm) {
		t.Fatalf("got %v", err)
	}
	want := map[string]string{
		"local": "(1) requirements.fork (not set): the cluster's LRMS is Fork, which the job takes only when it names Fork or no other LRMS is configured (2) requirements.queue (line 4): the job asks for queue debug, the cluster has no queues (3) os_name: the job asks for Linux, the cluster does not report its os_name (4) requirements.software (line 7): the job needs abinit > 10, which the cluster does not have",
		"hpc":   "requirements.software (line 7): the job needs abinit > 10, the cluster has abinit 9.10.3",
		"old":   "(1) requirements.queue (line 4): the job asks for queue debug, the cluster has workq (2) requirements.software (line 7): the job needs abinit > 10, the cluster has abinit 6.0",
	}
	for name, w := range want {
		if nm.Excluded[name] != w {
			t.Errorf("%s:\n got %s\nwant %s", name, nm.Excluded[name], w)
		}
	}
	if !strings.Contains(err.Error(), "hpc: requirements.software (line 7): the job needs abinit > 10") {
		t.Errorf("message %q", err)
	}
}

func TestNoMatchNamesEachRequirementsOrigin(t *testing.T) {
	p := mustPlanner(t, testSet(t, nil), matchClusters()...)
	two := 5.0
	from := func(f string, line int) events.Origin { return events.Origin{Field: f, Line: line} }
	req := events.Requirements{
		Hosts:       []events.NameRequirement{{AnyOf: []events.NamePattern{{Pattern: "(", Syntax: events.SyntaxRegexp}}, From: from("topology/declrequirement[r1]", 3)}},
		LRMS:        []events.LRMSRule{{Is: "pbs", From: from("job[0]/jobManagerType", 9)}},
		Attributes:  []events.AttributeRequirement{{Name: "gpus", AtLeast: &two, From: from("topology/declrequirement[g]", 4)}},
		Unsupported: []events.UnsupportedRequirement{{What: `type "groupname" is not supported`, From: from("topology/declrequirement[grp]", 5)}},
	}
	_, err := p.Plan(events.Job{ID: "01O", Executable: "x", Requirements: req})
	var nm *NoMatchError
	if !errors.As(err, &nm) {
		t.Fatalf("got %v", err)
	}
	got := nm.Excluded["hpc"]
	for _, w := range []string{
		`topology/declrequirement[r1] (line 3): none of ( is a host of this cluster (login1.hpc.example.org, login2.hpc.example.org); "(" is not a valid pattern`,
		"job[0]/jobManagerType (line 9): the job asks for pbs, the cluster runs Slurm",
		"topology/declrequirement[g] (line 4): the job needs at least 5, the cluster has 4",
		`topology/declrequirement[grp] (line 5): type "groupname" is not supported`,
	} {
		if !strings.Contains(got, w) {
			t.Errorf("hpc's reason lacks %q:\n%s", w, got)
		}
	}
}

func TestForkOnlyGatewayRunsBatchDefaultJobs(t *testing.T) {
	p := mustPlanner(t, testSet(t, nil), cluster.LocalFork())
	inc, err := p.Plan(events.Job{ID: "01F", Executable: "/bin/true", Requirements: events.Requirements{LRMSDefault: events.LRMSBatch}})
	if err != nil || inc.Cluster != "local" {
		t.Errorf("got %q %v", inc.Cluster, err)
	}
	_, err = p.Plan(events.Job{ID: "01F", Executable: "/bin/true", Requirements: events.Requirements{LRMS: []events.LRMSRule{{IsNot: "fork"}}}})
	var nm *NoMatchError
	if !errors.As(err, &nm) {
		t.Errorf("a job refusing Fork ran on a fork cluster: %v", err)
	}
}

func TestCompareVersions(t *testing.T) {
	cases := []struct {
		a, b string
		want int
	}{
		{"1.0", "1.0", 0}, {"1.0", "1.0.1", -1}, {"1.10", "1.9", 1}, {"2.6.35", "2.6.35", 0}, {"6", "6.0", 0},
		{"7.1", "7.1.0", 0}, {"6", "6.0.1", -1}, {"6.0.0.2", "6", 1}, {"1.0.0rc1", "1", -1}, {"6.00", "6", 0},
		{"9.10.3", "10", -1}, {"1.0rc1", "1.0", -1}, {"1.0a", "1.0b", -1}, {"007", "7", 0}, {"1-2", "1.2", 0},
		{"12345678901234567890", "9", 1},
	}
	for _, c := range cases {
		if got := compareVersions(c.a, c.b); got != c.want {
			t.Errorf("compare(%q, %q) = %d, want %d", c.a, c.b, got, c.want)
		}
		if got := compareVersions(c.b, c.a); got != -c.want {
			t.Errorf("compare(%q, %q) = %d, want %d", c.b, c.a, got, -c.want)
		}
	}
}

func TestGlob(t *testing.T) {
	cases := []struct {
		p, s string
		want bool
	}{
		{"*", "", true}, {"lin*", "Linux", true}, {"L?nux", "linux", true}, {"*64", "x86_64", true}, {"x86", "x86_64", false},
		{"a*b*c", "aXXbYYc", true}, {"a*b*c", "aXXbYY", false}, {"[ab]", "a", false}, {"[ab]", "[ab]", true},
		{"*/*", "a/b", true}, {"??", "abc", false},
	}
	for _, c := range cases {
		if got := globMatch(c.p, c.s); got != c.want {
			t.Errorf("glob %q on %q = %v", c.p, c.s, got)
		}
	}
}
