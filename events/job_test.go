package events

import (
	"testing"
	"time"
)

func TestParsePeriod(t *testing.T) {
	cases := []struct {
		in, want string
		fixed    time.Duration
		ok       bool
	}{
		{"PT10H3M", "PT10H3M", 10*time.Hour + 3*time.Minute, true},
		{"P1Y2M3DT4H5M6.5S", "P1Y2M3DT4H5M6.5S", 0, false},
		{"P2D", "P2D", 48 * time.Hour, true},
		{"-PT1S", "-PT1S", -time.Second, true},
		{"PT0.000000001S", "PT0.000000001S", 1, true},
		{"PT0S", "PT0S", 0, true},
	}
	for _, c := range cases {
		p, err := ParsePeriod(c.in)
		if err != nil {
			t.Fatalf("ParsePeriod(%q): %v", c.in, err)
		}
		if p.String() != c.want {
			t.Errorf("ParsePeriod(%q).String() = %q", c.in, p.String())
		}
		d, ok := p.Fixed()
		if ok != c.ok || d != c.fixed {
			t.Errorf("%q.Fixed() = %v, %v; want %v, %v", c.in, d, ok, c.fixed, c.ok)
		}
	}
	for _, bad := range []string{"", "P", "PT", "10H", "P1H", "PT1D", "P1M1Y", "P1.5Y", "PT.5S", "P1Y1Y",
		"PT1.5M", "P99999999999999999999Y", "P-1Y", "P1", "PT1S2"} {
		if _, err := ParsePeriod(bad); err == nil {
			t.Errorf("ParsePeriod(%q) accepted", bad)
		}
	}
}

func TestPeriodAddTo(t *testing.T) {
	p, _ := ParsePeriod("P1M1DT1H")
	base := time.Date(2004, 1, 31, 0, 0, 0, 0, time.UTC)
	if got, want := p.AddTo(base), time.Date(2004, 3, 3, 1, 0, 0, 0, time.UTC); !got.Equal(want) {
		t.Fatalf("AddTo = %v, want %v", got, want)
	}
}

func TestJobSubstitute(t *testing.T) {
	j := Job{
		Executable: "{HOME}/a.out", Arguments: []string{"{taskid}", "{other}"},
		Environment: []EnvVar{{Name: "Q", Value: "{queue}"}},
		Stdout:      []string{"gsiftp://h/{taskid}/out"},
		StageIn:     []FileCopy{{From: "gsiftp://h/{lrms}", To: "in_{taskid}"}},
		Name:        "{taskid} stays in the name", Substitutions: []string{"taskid", "queue", "lrms"},
	}
	got := j.Substitute(map[string]string{"taskid": "7", "queue": "q", "lrms": "PBS", "HOME": "/h", "other": "x"})
	if got.Executable != "{HOME}/a.out" || got.Arguments[0] != "7" || got.Arguments[1] != "{other}" ||
		got.Environment[0].Value != "q" || got.Stdout[0] != "gsiftp://h/7/out" ||
		got.StageIn[0] != (FileCopy{From: "gsiftp://h/PBS", To: "in_7"}) || got.Name != j.Name {
		t.Fatalf("Substitute = %+v", got)
	}
	if j.Arguments[0] != "{taskid}" || j.StageIn[0].To != "in_{taskid}" {
		t.Fatal("Substitute changed the original job")
	}
}

func TestCompareVersions(t *testing.T) {
	cases := []struct {
		a, b string
		want int
	}{
		{"2.6.35", "2.6.35", 0}, {"2.10", "2.9", 1}, {"6", "6.0", -1}, {"7", "6", 1},
		{"1.0-rc2", "1.0-rc10", -1}, {"1.0", "1.0rc1", -1}, {"007", "7", 0}, {"1.a", "1.1", -1},
		{"", "", 0}, {"", "1", -1},
	}
	for _, c := range cases {
		if got := CompareVersions(c.a, c.b); got != c.want {
			t.Errorf("CompareVersions(%q, %q) = %d, want %d", c.a, c.b, got, c.want)
		}
		if got := CompareVersions(c.b, c.a); got != -c.want {
			t.Errorf("CompareVersions(%q, %q) = %d, want %d", c.b, c.a, got, -c.want)
		}
	}
}

func TestSoftwareAdmits(t *testing.T) {
	// The spec's example: "mvapich, abinit > 6, orca==2.6.35".
	cases := []struct {
		c       SoftwareConstraint
		version string
		want    bool
	}{
		{SoftwareConstraint{Name: "mvapich"}, "", true},
		{SoftwareConstraint{Name: "abinit", Op: ">", Version: "6"}, "6.1", true},
		{SoftwareConstraint{Name: "abinit", Op: ">", Version: "6"}, "5.9", false},
		{SoftwareConstraint{Name: "orca", Op: "==", Version: "2.6.35"}, "2.6.35", true},
		{SoftwareConstraint{Name: "orca", Op: "==", Version: "2.6.36"}, "2.6.35", false},
		{SoftwareConstraint{Name: "x", Op: "<", Version: "2"}, "1.9", true},
		{SoftwareConstraint{Name: "x", Op: "<=", Version: "2"}, "2", true},
		{SoftwareConstraint{Name: "x", Op: ">=", Version: "2"}, "1", false},
		{SoftwareConstraint{Name: "x", Op: "!=", Version: "2"}, "1", false},
	}
	for _, c := range cases {
		if got := c.c.Admits(c.version); got != c.want {
			t.Errorf("%+v.Admits(%q) = %v", c.c, c.version, got)
		}
	}
}

func TestMatchWildcard(t *testing.T) {
	cases := []struct {
		p, s string
		want bool
	}{
		{"Linux", "Linux", true}, {"Linux", "linux", false}, {"2.6.*", "2.6.32-504", true},
		{"2.6.*", "3.10", false}, {"?", "7", true}, {"?", "", false}, {"*", "", true},
		{"x86_6?", "x86_64", true}, {"*a*b*", "xxaxxbxx", true}, {"*a*b", "ab_a", false},
		{"[abc]", "[abc]", true}, {"Ubuntü*", "Ubuntü 20", true},
	}
	for _, c := range cases {
		if got := MatchWildcard(c.p, c.s); got != c.want {
			t.Errorf("MatchWildcard(%q, %q) = %v", c.p, c.s, got)
		}
	}
}

func TestAllowsFork(t *testing.T) {
	yes, no := true, false
	for _, c := range []struct {
		r    Requirements
		want bool
	}{{Requirements{}, false}, {Requirements{LRMS: "Fork"}, true}, {Requirements{Fork: &yes}, true},
		{Requirements{Fork: &no, LRMS: "PBS"}, false}} {
		if c.r.AllowsFork() != c.want {
			t.Errorf("%+v.AllowsFork() != %v", c.r, c.want)
		}
	}
}

// FuzzParsePeriod: any accepted period prints as text that reads back as the same period.
func FuzzParsePeriod(f *testing.F) {
	for _, s := range []string{"PT10H3M", "P1Y2M3DT4H5M6.5S", "-P2D", "PT0.000000001S", "P", "PT"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParsePeriod(s)
		if err != nil {
			return
		}
		q, err := ParsePeriod(p.String())
		if err != nil || q != p {
			t.Fatalf("%q -> %q -> %+v, %v", s, p.String(), q, err)
		}
		p.Fixed()
	})
}
