package target

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/user"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/gridwire/gridwire/pkg/shellquote"
)

// Output is what a script printed and how it ended.
type Output struct {
	Stdout, Stderr []byte
	ExitCode       int
	// HostKey is the SHA256 fingerprint of the host key verified for the connection the
	// script ran over; "" on this host.
	HostKey string
}

// OK reports a zero exit.
func (o Output) OK() bool { return o.ExitCode == 0 }

// Describe is the exit status and the script's stderr (else stdout), trimmed, for errors
// and events.
func (o Output) Describe() string {
	text := strings.TrimSpace(string(o.Stderr))
	if text == "" {
		text = strings.TrimSpace(string(o.Stdout))
	}
	if len(text) > 2000 {
		text = text[:2000] + "..."
	}
	return fmt.Sprintf("exit %d: %s", o.ExitCode, text)
}

// Excerpt is at most n bytes of what a script printed, marked "..." where cut, for an
// error message.
func Excerpt(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "..."
	}
	return string(b)
}

// WithVars prefixes script with shell assignments of vars, each value quoted, exported
// so the programs the script runs (static scripts among them) see them too. Names must
// be shell variable names; values are anything.
func WithVars(vars map[string]string, script string) string {
	names := make([]string, 0, len(vars))
	for k := range vars {
		names = append(names, k)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, k := range names {
		b.WriteString(k + "=" + shellquote.Quote(vars[k]) + "\n")
	}
	if len(names) > 0 {
		b.WriteString("export " + strings.Join(names, " ") + "\n")
	}
	b.WriteString(script)
	return b.String()
}

// Local runs scripts on this host with /bin/sh, in the calling process's environment (a
// batch system's clients need theirs, e.g. SLURM_CONF), with LOGNAME set as a login sets
// it when the process has none (localEnv).
type Local struct{}

// localEnv is the environment of a script run on this host: nil (the calling process's)
// when it names its account in LOGNAME, else that environment with LOGNAME set to the
// process's own account, as a login would set it. A JOB script names its account from
// LOGNAME (a profile's USER_NAME without a configured user is ${LOGNAME:-$(id -un)}),
// and a batch system's submit command passes the environment on to the job: a gateway
// started without LOGNAME (a service manager's unit without User=, a container) made
// every Slurm job fork id -un, about 2 ms of CPU a job on the project's machine.
func localEnv() []string {
	if os.Getenv("LOGNAME") != "" {
		return nil
	}
	name := accountName()
	if name == "" {
		return nil
	}
	return append(os.Environ(), "LOGNAME="+name)
}

// accountName is the name of this process's account, "" when it has none (a uid
// without an entry in the user database).
var accountName = sync.OnceValue(func() string {
	u, err := user.Current()
	if err != nil {
		return ""
	}
	return u.Username
})

// Host is this host's name.
func (Local) Host() string {
	h, _ := os.Hostname()
	return h
}

// Run runs script with /bin/sh -c. A non-zero exit is an Output, not an error; errors
// are failures to run at all, and ctx ending first.
func (Local) Run(ctx context.Context, script string) (Output, error) {
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", script)
	cmd.Env = localEnv()
	return runLocal(ctx, cmd)
}

// Feed runs script by feeding it to /bin/sh on its standard input, so that its size is
// not bound by the system's limit on an argument (128 KiB on Linux). The script must
// keep its commands off that input (it is the script itself).
func (l Local) Feed(ctx context.Context, script string) (Output, error) {
	var stdout bytes.Buffer
	out, err := l.Stream(ctx, script, func(string) io.Writer { return &stdout })
	out.Stdout = stdout.Bytes()
	return out, err
}

// Stream is Feed with the script's standard output written as it comes instead of kept
// in the Output (whose Stdout is then nil). stdout is called once, before the script
// runs, with the host key the connection was verified by ("" on this host), and returns
// the writer of the output. Every write has happened when Stream returns.
func (Local) Stream(ctx context.Context, script string, stdout func(hostKey string) io.Writer) (Output, error) {
	cmd := exec.CommandContext(ctx, "/bin/sh", "-s")
	cmd.Env = localEnv()
	cmd.Stdin = strings.NewReader(script)
	// Once the shell is gone, what it started may still hold its output open (a START
	// that hangs): that must not hold the caller.
	cmd.WaitDelay = time.Second
	cmd.Stdout = stdout("")
	return runLocal(ctx, cmd)
}

// runLocal runs cmd to its end and collects its Output (its standard output only when
// the caller left cmd.Stdout unset). A shell killed by a signal reports 128+9, as a
// shell reports a child killed so.
func runLocal(ctx context.Context, cmd *exec.Cmd) (Output, error) {
	var stdout, stderr bytes.Buffer
	if cmd.Stdout == nil {
		cmd.Stdout = &stdout
	}
	cmd.Stderr = &stderr
	err := cmd.Run()
	out := Output{Stdout: stdout.Bytes(), Stderr: stderr.Bytes()}
	if cmd.Stdout != &stdout {
		out.Stdout = nil
	}
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit) && ctx.Err() == nil:
		out.ExitCode = exit.ExitCode()
		if out.ExitCode < 0 {
			out.ExitCode = 128 + 9
		}
	default:
		return out, fmt.Errorf("running a script on this host: %w", err)
	}
	return out, nil
}
