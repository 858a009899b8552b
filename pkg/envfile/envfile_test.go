package envfile_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/gridwire/gridwire/pkg/envfile"
	"github.com/gridwire/gridwire/pkg/shellquote"
)

func TestEncodeDecode(t *testing.T) {
	vars := []envfile.Var{{"GRIDWIRE_PROPERTY_URL", "http://node1:8080"}, {"T", "gwt1.01J.a b='c' $(x) `y`"}, {"EMPTY", ""}}
	s, err := envfile.Encode(vars)
	if err != nil {
		t.Fatal(err)
	}
	if want := "GRIDWIRE_PROPERTY_URL=http://node1:8080\nT=gwt1.01J.a b='c' $(x) `y`\nEMPTY=\n"; s != want {
		t.Fatalf("Encode = %q, want %q", s, want)
	}
	got, err := envfile.Decode(s)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(vars, got); d != "" {
		t.Fatalf("Decode(Encode) (-want +got):\n%s", d)
	}
	if got, err := envfile.Decode(""); err != nil || len(got) != 0 {
		t.Fatalf("Decode(\"\") = %v, %v", got, err)
	}
	for name, bad := range map[string][]envfile.Var{"newline": {{"A", "x\ny"}}, "NUL": {{"A", "x\x00"}},
		"bad name": {{"1A", "x"}}, "empty name": {{"", "x"}}, "name with =": {{"A=B", "x"}}} {
		if _, err := envfile.Encode(bad); !errors.Is(err, envfile.ErrValue) {
			t.Errorf("%s: Encode = %v, want ErrValue", name, err)
		}
	}
	if _, err := envfile.Decode("A=1\nnot a line\n"); err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Fatalf("Decode of a bad line: %v", err)
	}
}

// Load, run by /bin/sh, exports exactly the variables it names from the file, their
// values literally (nothing in them runs), and does nothing when the file is missing.
func TestLoadUnderSh(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "vars")
	witness := filepath.Join(dir, "ran")
	content, err := envfile.Encode([]envfile.Var{{"WANT_A", "a 'b' $(touch " + witness + ") `touch " + witness + "`"},
		{"OTHER", "not asked for"}, {"WANT_B", "last line without newline"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, []byte(strings.TrimSuffix(content, "\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	load := envfile.Load(shellquote.Quote(file), "WANT_A", "WANT_B")
	out, err := exec.Command("/bin/sh", "-c", load+`sh -c 'printf "%s|%s|%s" "$WANT_A" "$WANT_B" "${OTHER-unset}"'`).CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if want := "a 'b' $(touch " + witness + ") `touch " + witness + "`|last line without newline|unset"; string(out) != want {
		t.Fatalf("the child saw %q, want %q", out, want)
	}
	if _, err := os.Stat(witness); err == nil {
		t.Fatal("a value in the file ran as shell")
	}
	out, err = exec.Command("/bin/sh", "-c", envfile.Load(shellquote.Quote(filepath.Join(dir, "missing")), "WANT_A")+`echo "ok ${WANT_A-unset}"`).CombinedOutput()
	if err != nil || string(out) != "ok unset\n" {
		t.Fatalf("a missing file: %q, %v", out, err)
	}
	if envfile.Load("f") != "" {
		t.Fatal("Load with no names is not empty")
	}
}

// Decode never panics, and what it accepts encodes back to the same content (with its
// last newline).
func FuzzDecode(f *testing.F) {
	f.Add("GRIDWIRE_PROPERTY_URL=http://node1:8080\nGRIDWIRE_PROPERTY_TOKEN=gwt1.01JOB.c2lnbmF0dXJl\n")
	f.Add("A=\nB==x\n")
	f.Add("not a line\n")
	f.Add("")
	f.Fuzz(func(t *testing.T, content string) {
		vars, err := envfile.Decode(content)
		if err != nil {
			return
		}
		back, err := envfile.Encode(vars)
		if err != nil {
			t.Fatalf("Decode(%q) = %v, which Encode refuses: %v", content, vars, err)
		}
		if want := strings.TrimSuffix(content, "\n"); content != "" && strings.TrimSuffix(back, "\n") != want {
			t.Fatalf("Decode(%q) encodes back to %q", content, back)
		}
	})
}
