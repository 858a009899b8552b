package target

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Missing static scripts are installed where they belong, 0700 in 0700 directories;
// one that is there is left alone; the body arrives byte for byte.
func TestInstallScript(t *testing.T) {
	root := t.TempDir()
	body := "#!/bin/sh\necho 'it''s' \"$1\" `x` \\\n"
	fresh := Static{Name: "gw-a", Location: filepath.Join(root, "bin", "sub", "gw-a-01"), Body: body}
	kept := Static{Name: "gw-b", Location: filepath.Join(root, "gw-b-02"), Body: "new"}
	if err := os.WriteFile(kept.Location, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	script, err := InstallScript([]Static{fresh, kept})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		if out, err := (Local{}).Run(context.Background(), script+"echo done\n"); err != nil || string(out.Stdout) != "done\n" {
			t.Fatalf("run %d: %s %v", i, out.Describe(), err)
		}
	}
	b, err := os.ReadFile(fresh.Location)
	if err != nil || string(b) != body {
		t.Fatalf("installed %q %v, want %q", b, err, body)
	}
	for p, want := range map[string]os.FileMode{fresh.Location: 0o700, filepath.Dir(fresh.Location): 0o700, filepath.Join(root, "bin"): 0o700} {
		if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s: %v %v, want mode %v", p, fi.Mode().Perm(), err, want)
		}
	}
	if b, _ := os.ReadFile(kept.Location); string(b) != "old" {
		t.Errorf("an installed script was rewritten: %q", b)
	}
	if m, _ := filepath.Glob(filepath.Join(root, "bin", "sub", "*.tmp-*")); len(m) != 0 {
		t.Errorf("temporary files left: %v", m)
	}
}

// A script that cannot be installed stops the script with InstallExit and says which.
func TestInstallScriptFails(t *testing.T) {
	root := t.TempDir()
	blocker := filepath.Join(root, "file")
	os.WriteFile(blocker, nil, 0o600)
	script, err := InstallScript([]Static{{Name: "gw-c", Location: filepath.Join(blocker, "gw-c-03"), Body: "x"}})
	if err != nil {
		t.Fatal(err)
	}
	out, err := (Local{}).Run(context.Background(), script+"echo went on\n")
	if err != nil || out.ExitCode != InstallExit || strings.Contains(string(out.Stdout), "went on") ||
		!strings.Contains(string(out.Stderr), "cannot install static script gw-c at "+blocker) {
		t.Fatalf("%s %v; want exit %d naming gw-c", out.Describe(), err, InstallExit)
	}
}

// What a script cannot carry, or would put somewhere unknown, is refused up front.
func TestInstallScriptRefuses(t *testing.T) {
	for _, s := range []Static{
		{Name: "rel", Location: "bin/gw", Body: "x"},
		{Name: "empty", Location: "", Body: "x"},
		{Name: "nul", Location: "/bin/gw", Body: "a\x00b"},
	} {
		if _, err := InstallScript([]Static{s}); !errors.Is(err, ErrStatic) || !strings.Contains(err.Error(), s.Name) {
			t.Errorf("%s: %v; want ErrStatic naming it", s.Name, err)
		}
	}
}
