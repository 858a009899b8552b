// Package envfile owns the private file through which gridwire hands a job variables
// that must reach it but must not pass through the system that runs it: a batch
// system's submit command may drop the submitting environment (PBS's qsub without -V,
// sbatch under --export=NONE) or keep it in job attributes others can read (qsub -V,
// qsub -v). The executor writes the file beside the job before the job is submitted;
// the job's own script reads it when it starts on its node. The file holds NAME=VALUE
// lines; Load takes the names it is told to and evaluates nothing, so a value is never
// read as shell. Where the file lives, who writes it and when it goes are its users'
// to decide; this package keeps the writer and the reader of its form in one place.
package envfile

import (
	"errors"
	"fmt"
	"strings"

	"github.com/gridwire/gridwire/pkg/shellquote"
)

// PropertyFile is where, relative to a job's working directory (in its control
// directory, .gridwire), the executor leaves a DDS task on a batch system the property
// API's address and the task's credential, and where the task's JOB script looks for
// them.
const PropertyFile = ".gridwire/property.env"

// Var is one variable of the file.
type Var struct{ Name, Value string }

// ErrValue refuses a variable the file cannot carry.
var ErrValue = errors.New("envfile: a variable the file cannot carry")

// Encode is the file's content: one NAME=VALUE line per variable, in order.
func Encode(vars []Var) (string, error) {
	var b strings.Builder
	for _, v := range vars {
		if !validName(v.Name) {
			return "", fmt.Errorf("%w: name %q", ErrValue, v.Name)
		}
		if strings.ContainsAny(v.Value, "\n\x00") {
			return "", fmt.Errorf("%w: %s's value holds a newline or a NUL byte", ErrValue, v.Name)
		}
		b.WriteString(v.Name + "=" + v.Value + "\n")
	}
	return b.String(), nil
}

// Decode reads the file's content back; a line that is not NAME=VALUE (or holds a NUL
// byte) is an error.
func Decode(content string) ([]Var, error) {
	var vars []Var
	for i, line := range strings.Split(strings.TrimSuffix(content, "\n"), "\n") {
		if line == "" && content == "" {
			break
		}
		name, value, ok := strings.Cut(line, "=")
		if !ok || !validName(name) || strings.IndexByte(value, 0) >= 0 {
			return nil, fmt.Errorf("%w: line %d is not NAME=VALUE", ErrValue, i+1)
		}
		vars = append(vars, Var{Name: name, Value: value})
	}
	return vars, nil
}

// Load is POSIX shell that exports the named variables the file at path (a shell word,
// already quoted or expanded as its caller wants) holds, and nothing else; a missing file
// is no error, and nothing in the file is evaluated. It runs in the shell itself (a
// read loop, no process) and uses the variable gw_l.
func Load(path string, names ...string) string {
	if len(names) == 0 {
		return ""
	}
	pats := make([]string, len(names))
	for i, n := range names {
		pats[i] = shellquote.Quote(n+"=") + "*"
	}
	return "[ ! -f " + path + " ] || while IFS= read -r gw_l || [ -n \"$gw_l\" ]; do case $gw_l in " +
		strings.Join(pats, " | ") + ") export \"$gw_l\" ;; esac; done <" + path + "\n"
}

// validName reports whether name is a shell variable name.
func validName(name string) bool {
	for i, c := range name {
		if c != '_' && (c < 'A' || c > 'Z') && (c < 'a' || c > 'z') && (i == 0 || c < '0' || c > '9') {
			return false
		}
	}
	return name != ""
}
