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
		{"143 jobDuration PT2S: ended\n", "143 jobDuration PT2S: ended", true, 143, true},
	} {
		p := filepath.Join(dir, "f")
		os.Remove(p)
		if c.content != "-" {
			os.WriteFile(p, []byte(c.content), 0o600)
		}
		if v, ok := ReadLine(p); v != c.line || ok != c.lineOK {
			t.Errorf("ReadLine(%q) = %q %v, want %q %v", c.content, v, ok, c.line, c.lineOK)
		}
		code, reason, ok := ReadExitStatus(p)
		if code != c.code || ok != c.exitStatus || (code == 143) != (reason == "jobDuration PT2S: ended") {
			t.Errorf("ReadExitStatus(%q) = %d %q %v, want %d %v", c.content, code, reason, ok, c.code, c.exitStatus)
		}
	}
}
