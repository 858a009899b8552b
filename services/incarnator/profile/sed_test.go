package profile

import (
	"errors"
	"os/exec"
	"strings"
	"testing"
)

// A two-level replacement on a run-time value runs on the target with sed. For every
// pattern in the translatable subset, sed's result on the target equals what Java's
// replaceAll (RE2 here, the same for this subset) gives for the same value.
func TestSedAppliesTwoLevelReplacementsAsJavaWould(t *testing.T) {
	cases := []struct{ from, to, value string }{
		{`\/[^\/]*$`, ``, "/var/gw/jobs/01ABC"},
		{`^01`, `XX`, "01JQ7ZC3K1"},
		{`\.log`, ``, "y.log"},
		{`(\w+)@(\w+)`, `$2 at $1`, "me@host and you@there"},
		{`\d+`, `#`, "a1b22c333"},
		{`\s+`, `_`, "a b \t c"},
		{`[^a-z]`, `-`, "ab/CD-ef"},
		{`[]^-]`, `.`, "a]b^c-d"},
		{`[\d.]+`, `N`, "v1.2.3-rc"},
		{`\Q.*\E`, `!`, "a.*b.*"},
		{`x*`, `-`, "abc"},
		{`a{2,3}`, `A`, "aaaaaaa"},
		{`\$HOME`, `~`, "$HOME/x"},
		{`(.)(.)`, `$2$1\\&`, "abcd"},
		{`o`, `&`, "foo"},
		{`\/`, `#,;:@%!~=_`, "a/b"},
		{`^`, `'quote' "\$(touch nope)" `, "v"},
		{`\D\W\S`, `|`, "a.bc"},
		{`[\^]`, `v`, `a^b\c`},
		{`[-^]`, `_`, "a-b^c"},
		{`[^^]`, `.`, "a^b"},
		{`[\]]x`, `!`, "]x]y"},
	}
	for _, c := range cases {
		txt, err := ParseText(`printf '%s\n' <V/` + c.from + `/` + c.to + `>`)
		if err != nil {
			t.Fatalf("%s: %v", c.from, err)
		}
		r := txt.Replacements()[0]
		if r.SedErr != nil {
			t.Errorf("%s → %s: %v", c.from, c.to, r.SedErr)
			continue
		}
		want := r.From.ReplaceAllString(c.value, r.To)
		out, err := txt.AppendExpand(nil, func(string) (Value, error) {
			return Value{Text: `"$V"`, Trusted: true, Runtime: `$V`}, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("/bin/sh", "-c", string(out))
		cmd.Env = []string{"PATH=/usr/bin:/bin", "V=" + c.value}
		cmd.Dir = t.TempDir()
		got, err := cmd.Output()
		if err != nil {
			t.Errorf("%s → %s: %v (script %s)", c.from, c.to, err, out)
			continue
		}
		if strings.TrimSuffix(string(got), "\n") != want {
			t.Errorf("%s → %s on %q: sed gave %q, Java %q (script %s)", c.from, c.to, c.value, got, want, out)
		}
	}
}

func TestSedRefusesWhatPOSIXReadsDifferently(t *testing.T) {
	cases := map[string]string{
		`a|b`:      "alternation",
		`(ab)*`:    "quantifier on a group",
		`a*?`:      "lazy",
		`(?:a)b`:   "(?...) groups",
		`(?i)abc`:  "(?...) groups",
		`\bword`:   `\b has no POSIX counterpart`,
		`\x41`:     `\x has no POSIX counterpart`,
		`[\\a]`:    `inside a character class`,
		`[\x00-z]`: `inside a character class`,
	}
	for from, want := range cases {
		txt, err := ParseText(`echo <V/` + from + `/x>`)
		if err != nil {
			t.Fatalf("%s: %v", from, err)
		}
		r := txt.Replacements()[0]
		if r.SedErr == nil || !errors.Is(r.SedErr, errSed) || !strings.Contains(r.SedErr.Error(), want) {
			t.Errorf("%s: got %v, want an errSed about %q", from, r.SedErr, want)
		}
		// On a value known when rendering, the same replacement still works.
		if got := expand(t, `echo <V/`+from+`/x>`, map[string]Value{"V": {Text: "ab", Trusted: true}}); !strings.HasPrefix(got, "echo ") {
			t.Errorf("%s on a render-time value: %q", from, got)
		}
		_, err = txt.AppendExpand(nil, func(string) (Value, error) { return Value{Text: `"$V"`, Trusted: true, Runtime: `$V`}, nil })
		var pe *PlacementError
		if !errors.As(err, &pe) {
			t.Errorf("%s on a run-time value: got %v, want a PlacementError", from, err)
		}
	}
}

// Where the replacement sits in the template decides how the command substitution is
// written: quoted as one word outside quotes, bare inside double quotes, the single
// quotes closed around it inside single quotes; a list of words is left to splitting.
func TestRunTimeReplacementPlaces(t *testing.T) {
	run := func(src string, v Value) string {
		t.Helper()
		txt, err := ParseText(src)
		if err != nil {
			t.Fatal(err)
		}
		out, err := txt.AppendExpand(nil, func(string) (Value, error) { return v, nil })
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("/bin/sh", "-c", `set -- `+string(out)+`; printf '[%s]' "$@"`)
		cmd.Env = []string{"PATH=/usr/bin:/bin", "V=/a b/c d", "L=1.x 2.x 3.x"}
		got, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s: %v", out, err)
		}
		return string(got)
	}
	one := Value{Text: `"$V"`, Trusted: true, Runtime: `$V`}
	for src, want := range map[string]string{
		`<V/\/[^\/]*$/>`:      `[/a b]`,
		`"in <V/ /_> quotes"`: `[in /a_b/c_d quotes]`,
		`'in <V/ /_> single'`: `[in /a_b/c_d single]`,
	} {
		if got := run(src, one); got != want {
			t.Errorf("%s: got %s, want %s", src, got, want)
		}
	}
	list := Value{Text: `$L`, Trusted: true, Runtime: `$L`, Split: true}
	if got := run(`<L/\.x/>`, list); got != `[1][2][3]` {
		t.Errorf("list: got %s", got)
	}
}

// The Java-to-sed translation is a parser of profile text: whatever it is given, it
// never panics, and a script it makes is one line whose delimiter closes exactly three
// parts (s, pattern, replacement, flags).
func FuzzSedProgram(f *testing.F) {
	for _, s := range [][2]string{{`\/[^\/]*$`, ``}, {`^01`, `XX`}, {`(\w+)@(\w+)`, `$2 at $1`},
		{`[]^-]`, `.`}, {`\Q.*\E`, `!`}, {`a|b`, `x`}, {`(ab)*`, `$1`}, {`[\\a]`, `\\`}, {`x{2,`, `&`}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, from, to string) {
		prog, err := sedProgram(from, to)
		if err != nil {
			return
		}
		if strings.ContainsAny(prog, "\n\x00") || !strings.HasPrefix(prog, "s") || !strings.HasSuffix(prog, "g") {
			t.Fatalf("%q, %q: script %q", from, to, prog)
		}
		d := prog[1:2]
		if n := strings.Count(prog, d); n != 3 {
			t.Fatalf("%q, %q: script %q has its delimiter %q %d times", from, to, prog, d, n)
		}
	})
}
