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

func TestMatching(t *testing.T) {
	p := mustPlanner(t, testSet(t, nil), matchClusters()...)
	yes, no := true, false
	cases := []struct {
		name  string
		req   events.Requirements
		v3    bool
		dds   []events.DDSRequirement
		app   *events.Application
		want  string // chosen cluster, or "" for no match
		queue string
	}{
		{name: "anything goes to the first", want: "local"},
		{name: "v3 fork rule skips Fork", v3: true, want: "hpc", queue: "batch"},
		{name: "v3 fork named in lrms", v3: true, req: events.Requirements{LRMS: "fork"}, want: "local"},
		{name: "v3 fork: true", v3: true, req: events.Requirements{Fork: &yes}, want: "local"},
		{name: "fork: false for any job", req: events.Requirements{Fork: &no}, want: "hpc"},
		{name: "lrms", req: events.Requirements{LRMS: "PBS"}, want: "old", queue: "workq"},
		{name: "lrms unknown", req: events.Requirements{LRMS: "Cleo"}},
		{name: "hostname", req: events.Requirements{Hosts: []string{"pbs.example.org"}}, want: "old"},
		{name: "hostname wildcard", req: events.Requirements{Hosts: []string{"login?.HPC.example.*"}}, want: "hpc"},
		{name: "hostname none", req: events.Requirements{Hosts: []string{"elsewhere"}}},
		{name: "queue", req: events.Requirements{Queue: "debug"}, want: "hpc", queue: "debug"},
		{name: "queue none", req: events.Requirements{Queue: "gpu"}},
		{name: "os_name wildcard, case", req: events.Requirements{OSName: "lin*", OSRelease: "5.*.el?.x86_64"}, want: "hpc"},
		{name: "os_version", req: events.Requirements{OSVersion: "Rocky 9*"}, want: "hpc"},
		{name: "platform", req: events.Requirements{Platform: "ppc64??"}, want: "old"},
		{name: "cpu_instruction_set", req: events.Requirements{CPUInstructionSet: "*avx512"}, want: "hpc"},
		{name: "cpu_instruction_set unreported", req: events.Requirements{CPUInstructionSet: "*", LRMS: "PBS"}},
		{name: "smp_size bound", req: events.Requirements{SMPSize: 64}, want: "hpc"},
		{name: "smp_size too big", req: events.Requirements{SMPSize: 65}},
		{name: "ram_size", req: events.Requirements{RAMSize: 17 << 10}, want: "hpc"},
		{name: "virtual_size", req: events.Requirements{VirtualSize: 1 << 40}},
		{name: "cpu_hz", req: events.Requirements{CPUHz: 2_000_000_000}, want: "hpc"},
		{name: "software by name", req: events.Requirements{Software: []events.SoftwareConstraint{{Name: "abinit"}}}, want: "hpc"},
		{name: "software > version", req: events.Requirements{Software: []events.SoftwareConstraint{{Name: "mvapich"}, {Name: "abinit", Op: ">", Version: "6"}, {Name: "orca", Op: "==", Version: "2.6.35"}}}, want: "hpc"},
		{name: "software <= picks the old one", req: events.Requirements{Software: []events.SoftwareConstraint{{Name: "abinit", Op: "<=", Version: "6.0.0"}}}, want: "old"},
		{name: "software < none", req: events.Requirements{Software: []events.SoftwareConstraint{{Name: "abinit", Op: "<", Version: "6"}}}},
		{name: "software any installed version", req: events.Requirements{Software: []events.SoftwareConstraint{{Name: "gcc", Op: ">=", Version: "13"}}}, want: "hpc"},
		{name: "software missing", req: events.Requirements{Software: []events.SoftwareConstraint{{Name: "matlab"}}}},
		{name: "jrdl minRAMAvailable", req: events.Requirements{Resources: map[string]string{"minRAMAvailable": "1000"}}, want: "hpc"},
		{name: "jrdl minStorageAvailable too much", req: events.Requirements{Resources: map[string]string{"minStorage/minStorageAvailable": "9000"}}},
		{name: "jrdl minFreeCPU, last15Min", req: events.Requirements{Resources: map[string]string{"minFreeCPU": "4", "last15Min": "10"}}, want: "hpc"},
		{name: "jrdl schedulingType scheduler", req: events.Requirements{Resources: map[string]string{"schedulingType": "scheduler"}}, want: "hpc"},
		{name: "jrdl schedulingType fork", req: events.Requirements{Resources: map[string]string{"schedulingType": "fork"}}, want: "local"},
		{name: "jrdl schedulingPlugin", req: events.Requirements{Resources: map[string]string{"schedulingPlugin": "Default"}}, want: "hpc"},
		{name: "jrdl jobManagerType", req: events.Requirements{Resources: map[string]string{"jobManagerType": "pbs"}}, want: "old"},
		{name: "jrdl clockSpeed MHz", req: events.Requirements{Resources: map[string]string{"clockSpeed": "2000"}}, want: "hpc"},
		{name: "jrdl minRAMSize MB", req: events.Requirements{Resources: map[string]string{"minRAMSize": "32768"}}, want: "hpc"},
		{name: "jrdl operatingSystem", req: events.Requirements{Resources: map[string]string{"operatingSystem": "Linux"}}, want: "hpc"},
		{name: "jrdl resourceManagerContact", req: events.Requirements{Resources: map[string]string{"resourceManagerContact": "https://pbs.example.org:8443/"}}, want: "old"},
		{name: "jrdl count", req: events.Requirements{Resources: map[string]string{"count": "100", "jobManagerType": "PBS"}}},
		{name: "dds hostname regex", dds: []events.DDSRequirement{{Name: "r1", Type: "hostname", Value: `login\d\.hpc\..*`}}, want: "hpc"},
		{name: "dds hostname, the spec's +.gsi.de form", dds: []events.DDSRequirement{{Name: "r1", Type: "hostname", Value: "+.example.org"}}, want: "hpc"},
		{name: "dds hostname full name", dds: []events.DDSRequirement{{Type: "hostname", Value: "pbs.example.org"}}, want: "old"},
		{name: "dds wnname", dds: []events.DDSRequirement{{Type: "wnname", Value: "ol.*"}}, want: "old"},
		{name: "dds gpu", dds: []events.DDSRequirement{{Type: "gpu", Value: "2"}}, want: "hpc"},
		{name: "dds unknown type", dds: []events.DDSRequirement{{Type: "magic", Value: "x"}}},
		{name: "application", app: &events.Application{Name: "MPI", Version: "generic"}, want: "local"},
		{name: "application unknown", app: &events.Application{Name: "POVRay"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			job := events.Job{ID: "01M", Executable: "x", Requirements: c.req, Application: c.app}
			if c.v3 {
				job.Original.Format = "v3-json"
			}
			if c.dds != nil {
				job.DDS = &events.DDSContext{Requirements: c.dds}
			}
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

func TestNoMatchSaysWhyPerCluster(t *testing.T) {
	p := mustPlanner(t, testSet(t, nil), matchClusters()...)
	job := events.Job{ID: "01N", Executable: "x", Original: events.Original{Format: "v3-yaml"}, Requirements: events.Requirements{
		Queue: "debug", Software: []events.SoftwareConstraint{{Name: "abinit", Op: ">", Version: "10"}}, OSName: "Linux"}}
	_, err := p.Plan(job)
	var nm *NoMatchError
	if !errors.As(err, &nm) {
		t.Fatalf("got %v", err)
	}
	want := map[string]string{
		"local": "(1) fork: the LRMS is Fork, which a v3 job uses only when it names Fork in lrms or sets fork: true (2) queue: the job asks for queue debug, the cluster has no queues (3) os_name: the job asks for Linux, the cluster does not report its os_name (4) software: the job needs abinit > 10, which the cluster does not have",
		"hpc":   "software: the job needs abinit > 10, the cluster has abinit 9.10.3",
		"old":   "(1) queue: the job asks for queue debug, the cluster has workq (2) software: the job needs abinit > 10, the cluster has abinit 6.0",
	}
	for name, w := range want {
		if nm.Excluded[name] != w {
			t.Errorf("%s:\n got %s\nwant %s", name, nm.Excluded[name], w)
		}
	}
	if !strings.Contains(err.Error(), "hpc: software: the job needs abinit > 10") {
		t.Errorf("message %q", err)
	}
}

func TestForkOnlyGatewayRunsV3Jobs(t *testing.T) {
	no := false
	p := mustPlanner(t, testSet(t, nil), cluster.LocalFork())
	inc, err := p.Plan(events.Job{ID: "01F", Executable: "/bin/true", Original: events.Original{Format: "v3-json"}})
	if err != nil || inc.Cluster != "local" {
		t.Errorf("got %q %v", inc.Cluster, err)
	}
	_, err = p.Plan(events.Job{ID: "01F", Executable: "/bin/true", Requirements: events.Requirements{Fork: &no}})
	var nm *NoMatchError
	if !errors.As(err, &nm) {
		t.Errorf("fork: false ran on a fork cluster: %v", err)
	}
}

func TestCompareVersions(t *testing.T) {
	cases := []struct {
		a, b string
		want int
	}{
		{"1.0", "1.0", 0}, {"1.0", "1.0.1", -1}, {"1.10", "1.9", 1}, {"2.6.35", "2.6.35", 0}, {"6", "6.0", -1},
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
