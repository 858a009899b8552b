package shellquote

import (
	"os/exec"
	"testing"
)

// hostile is a corpus of values that must never be interpreted by a shell.
var hostile = []string{
	"", "plain", "$(touch canary)", "`touch canary`", "'", "''", `"`, `\`, "a b",
	"line1\nline2", "*", "?", "[a-z]", "-rf", "--help", "~", "~root", "$HOME", "${HOME}",
	"a;touch canary", "a|touch canary", "a&&touch canary", "a>canary", "<canary",
	"!", "#comment", "=x", "x=y", "\t", "é ü", "'$(touch canary)'", "\"$(touch canary)\"",
}

func TestQuoteRoundTripsThroughRealShell(t *testing.T) {
	dir := t.TempDir()
	for _, v := range hostile {
		cmd := exec.Command("/bin/sh", "-c", "printf '%s' "+Quote(v))
		cmd.Dir = dir
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("Quote(%q) = %s: shell failed: %v", v, Quote(v), err)
		}
		if string(out) != v {
			t.Errorf("Quote(%q) = %s: shell read back %q", v, Quote(v), out)
		}
	}
	if entries, _ := exec.Command("ls", "-A", dir).Output(); len(entries) != 0 {
		t.Fatalf("a quoted value created files: %s", entries)
	}
}

func TestJoinKeepsWordsApart(t *testing.T) {
	cmd := exec.Command("/bin/sh", "-c", `for a in `+Join("a b", "", "$(x)")+`; do printf '[%s]' "$a"; done`)
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(out), "[a b][][$(x)]"; got != want {
		t.Fatalf("got %s, want %s", got, want)
	}
}

func FuzzQuote(f *testing.F) {
	for _, v := range hostile {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, v string) {
		q := Quote(v)
		// Outside quotes only safe bytes may appear; every quote must be balanced.
		in := false
		for i := 0; i < len(q); i++ {
			switch {
			case q[i] == '\'':
				in = !in
			case !in && q[i] == '\\' && i+1 < len(q) && q[i+1] == '\'':
				i++ // an escaped quote between quoted runs
			case !in && !isSafe(string(q[i])):
				t.Fatalf("unquoted special byte %q in %s", q[i], q)
			}
		}
		if in {
			t.Fatalf("unbalanced quotes in %s", q)
		}
	})
}

func TestIsName(t *testing.T) {
	for s, want := range map[string]bool{"PATH": true, "_x1": true, "a": true, "": false, "1A": false,
		"A-B": false, "A B": false, "A=B": false, "é": false, "$(x)": false} {
		if got := IsName(s); got != want {
			t.Errorf("IsName(%q) = %v, want %v", s, got, want)
		}
	}
}
