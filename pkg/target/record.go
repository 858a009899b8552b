package target

import (
	"os"
	"strconv"
	"strings"
)

// ReadLine reads a value that a job's process writes whole as one line ("<value>\n"): a
// native ID marker, an exit status file. A missing file, one whose line is not finished
// (no newline yet: its writer is at work) or one holding only blanks is not there.
func ReadLine(path string) (string, bool) {
	b, err := os.ReadFile(path)
	if err != nil || len(b) == 0 || b[len(b)-1] != '\n' {
		return "", false
	}
	v := strings.TrimSpace(string(b))
	return v, v != ""
}

// ReadExitStatus parses the exit status file at path ("<code>[ <reason>]\n", written by
// the job's epilogue; the reason is there when the job script ended the program itself);
// a missing, partial or malformed file is not an exit.
func ReadExitStatus(path string) (code int, reason string, ok bool) {
	v, ok := ReadLine(path)
	if !ok {
		return 0, "", false
	}
	return ParseExitLine(v)
}

// ParseExitLine reads an exit status line, "<code>[ <reason>]".
func ParseExitLine(v string) (code int, reason string, ok bool) {
	num, rest, _ := strings.Cut(strings.TrimSpace(v), " ")
	code, err := strconv.Atoi(num)
	if err != nil {
		return 0, "", false
	}
	return code, strings.TrimSpace(rest), true
}
