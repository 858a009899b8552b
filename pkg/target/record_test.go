package target

import (
	"os"
	"path/filepath"
	"strings"
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

// A line longer than the first read's buffer is read whole, and a directory (read
// fails) is no value.
func TestReadLineLongAndUnreadable(t *testing.T) {
	dir := t.TempDir()
	long := strings.Repeat("x", 5000)
	p := filepath.Join(dir, "f")
	if err := os.WriteFile(p, []byte("143 "+long+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, reason, ok := ReadExitStatus(p); !ok || code != 143 || reason != long {
		t.Errorf("ReadExitStatus of a %d-byte line = %d, %d-byte reason, %v", len(long)+5, code, len(reason), ok)
	}
	if v, ok := ReadLine(dir); ok || v != "" {
		t.Errorf("ReadLine(a directory) = %q %v", v, ok)
	}
}
