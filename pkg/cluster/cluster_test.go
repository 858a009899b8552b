package cluster

import (
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"
)

// An unknown key is an error wherever it is: at the top, in a cluster, in a token, in
// a user profile, in the system info, and in a service's own section.
func TestUnknownKeysAreErrorsInEverySection(t *testing.T) {
	cases := []struct{ name, src, want string }{
		{"top", "clusterz: []\n", "clusterz"},
		{"cluster", "clusters:\n  - name: a\n    kind: fork\n    profile: fork\n    wokr_root: /x\n", "wokr_root"},
		{"info", "clusters:\n  - name: a\n    kind: fork\n    profile: fork\n    info: {os_nmae: x}\n", "os_nmae"},
		{"token", "tokens:\n  - token: 0123456789abcdef\n    principal: a\n    permissions: [read]\n", "permissions"},
		{"user", "users:\n  - principal: a\n    feilds: {}\n", "feilds"},
	}
	for _, c := range cases {
		_, err := Parse("gw.yaml", []byte(c.src))
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "gw.yaml") {
			t.Errorf("%s: %v, want an error naming gw.yaml and %s", c.name, err, c.want)
		}
	}
}

type section struct {
	Workers int           `yaml:"workers"`
	Backoff time.Duration `yaml:"backoff"`
	HTTP    struct {
		Allow []string `yaml:"allow"`
	} `yaml:"http"`
	Roots []struct {
		Path string `yaml:"path"`
	} `yaml:"roots"`
	Named map[string]struct {
		Size int `yaml:"size"`
	} `yaml:"named"`
}

func TestDecodeSectionIsStrict(t *testing.T) {
	src := "stager:\n  workers: 3\n  backoff: 2s\n  http:\n    allow: [a]\n    alow: [b]\n  roots:\n    - path: /x\n    - pth: /y\n  named:\n    one: {size: 1, sise: 2}\n  extra: 1\n"
	cfg, err := Parse("gw.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	var s section
	err = cfg.DecodeSection("stager", cfg.Stager, &s)
	for _, want := range []string{"gw.yaml:6: stager.http.alow: unknown key", "gw.yaml:9: stager.roots[1].pth: unknown key", "gw.yaml:11: stager.named.one.sise: unknown key", "gw.yaml:12: stager.extra: unknown key (known: backoff, http, named, roots, workers)"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not say %q", err, want)
		}
	}
	ok := "stager:\n  workers: 3\n  backoff: 2s\n  http: {allow: [a]}\n  roots: [{path: /x}]\n  named: {one: {size: 1}}\n"
	if cfg, err = Parse("gw.yaml", []byte(ok)); err != nil {
		t.Fatal(err)
	}
	s = section{}
	if err := cfg.DecodeSection("stager", cfg.Stager, &s); err != nil || s.Workers != 3 || s.Backoff != 2*time.Second ||
		s.HTTP.Allow[0] != "a" || s.Roots[0].Path != "/x" || s.Named["one"].Size != 1 {
		t.Errorf("decoded %+v, %v", s, err)
	}
	if err := (Config{}).DecodeSection("stager", Config{}.Stager, &s); err != nil {
		t.Errorf("an absent section: %v", err)
	}
}

// Retention: absent keeps directories forever, 0 removes them at once, a duration or a
// number of days waits; anything else is refused with its line.
func TestRetention(t *testing.T) {
	base := "clusters:\n  - name: a\n    kind: fork\n    profile: fork\n"
	cfg, err := Parse("gw.yaml", []byte(base))
	if err != nil || cfg.Clusters[0].Retention != nil {
		t.Fatalf("absent: %+v %v", cfg.Clusters[0].Retention, err)
	}
	for src, want := range map[string]time.Duration{"0": 0, "2s": 2 * time.Second, "36h": 36 * time.Hour, "7d": 7 * 24 * time.Hour} {
		cfg, err := Parse("gw.yaml", []byte(base+"    retention: "+src+"\n"))
		if err != nil || cfg.Clusters[0].Retention == nil || cfg.Clusters[0].Retention.After != want {
			t.Errorf("retention %s: %+v %v, want %v", src, cfg.Clusters[0].Retention, err, want)
		}
	}
	for _, src := range []string{"-1h", "soon", "1.5d", "[1h]"} {
		_, err := Parse("gw.yaml", []byte(base+"    retention: "+src+"\n"))
		if !errors.Is(err, ErrInvalid) || !strings.HasPrefix(err.Error(), "gw.yaml:5: clusters[0].retention: ") || strings.Contains(err.Error(), `""`) {
			t.Errorf("retention %s: %v, want an error at line 5 naming retention", src, err)
		}
	}
}

// Every mistake in the file is reported at once, each as file:line: field: what is wrong,
// with the type a value should have in the user's words, not Go's.
func TestErrorsNameFileLineAndField(t *testing.T) {
	src := "clusters:\n" +
		"  - name: a\n" +
		"    kind: forky\n" +
		"  - name: a\n" +
		"    kind: fork\n" +
		"    profile: fork\n" +
		"    info: {os_name: Linux, smp_size: lots}\n" +
		"    allow_root: perhaps\n" +
		"    lrms: [Fork]\n"
	_, err := Parse("gw.yaml", []byte(src))
	want := []string{
		`gw.yaml:7: clusters[1].info.smp_size: "lots" is not a whole number`,
		`gw.yaml:8: clusters[1].allow_root: "perhaps" is not true or false`,
		`gw.yaml:9: clusters[1].lrms: a list is not a string`,
	}
	if !errors.Is(err, ErrInvalid) || err.Error() != strings.Join(want, "\n") {
		t.Errorf("type errors:\n%v\nwant\n%s", err, strings.Join(want, "\n"))
	}
	src = strings.NewReplacer("smp_size: lots", "smp_size: 2", "perhaps", "true", "[Fork]", "Fork").Replace(src)
	_, err = Parse("gw.yaml", []byte(src))
	want = []string{
		`gw.yaml:3: clusters[0].kind: "forky" is not fork or ssh`,
		`gw.yaml:2: clusters[0].profile: missing (the OS profile its jobs are rendered with: fork, slurm, pbs, ...)`,
		`gw.yaml:4: clusters[1].name: "a" is used twice`,
	}
	if !errors.Is(err, ErrInvalid) || err.Error() != strings.Join(want, "\n") {
		t.Errorf("checks:\n%v\nwant\n%s", err, strings.Join(want, "\n"))
	}
	// yaml.v3 gives a syntax error the line where the construct it was reading began.
	if _, err := Parse("gw.yaml", []byte("clusters:\n  - name: a\n   kind: fork\n")); !errors.Is(err, ErrInvalid) || !regexp.MustCompile(`^gw\.yaml:\d+: [^y]`).MatchString(err.Error()) {
		t.Errorf("a syntax error: %v, want it as gw.yaml:LINE: what", err)
	}
	if _, err := Parse("gw.yaml", []byte("clusterz: []\n")); err == nil || !strings.HasPrefix(err.Error(), "gw.yaml:1: clusterz: unknown key (known: clusters, ") {
		t.Errorf("an unknown top-level key: %v", err)
	}
	if c, err := Parse("gw.yaml", []byte("# nothing yet\n")); err != nil || len(c.Clusters) != 1 || c.Clusters[0].Name != "local" {
		t.Errorf("an empty file: %+v %v, want the default cluster", c, err)
	}
}
