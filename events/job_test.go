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
