package target

import (
	"os"
	"path/filepath"
	"testing"
)

// Only a finished line counts: a writer at work, a blank or a missing file is no value.
func TestReadLineAndExitStatus(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		content    string // "-": no file
		line       string
		lineOK     bool
		code       int
		exitStatus bool
	}{
		{"-", "", false, 0, false},
		{"", "", false, 0, false},
		{"\n", "", false, 0, false},
		{" \n", "", false, 0, false},
		{"4", "", false, 0, false},
		{"42\n", "42", true, 42, true},
		{"0\n", "0", true, 0, true},
		{" 3 \n", "3", true, 3, true},
		{"-1\n", "-1", true, -1, true},
		{"12345\n", "12345", true, 12345, true},
		{"oops\n", "oops", true, 0, false},
	} {
		p := filepath.Join(dir, "f")
		os.Remove(p)
		if c.content != "-" {
			os.WriteFile(p, []byte(c.content), 0o600)
		}
		if v, ok := ReadLine(p); v != c.line || ok != c.lineOK {
			t.Errorf("ReadLine(%q) = %q %v, want %q %v", c.content, v, ok, c.line, c.lineOK)
		}
		if code, ok := ReadExitStatus(p); code != c.code || ok != c.exitStatus {
			t.Errorf("ReadExitStatus(%q) = %d %v, want %d %v", c.content, code, ok, c.code, c.exitStatus)
		}
	}
}
