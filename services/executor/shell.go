package executor

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/gridwire/gridwire/pkg/shellquote"
)

// Shell runs scripts and writes files on one host of a target: this host (LocalShell)
// or a remote one over a pooled SSH connection (SSHShell).
type Shell interface {
	// Host names the host as the cluster config does ("" parts filled in), recorded in
	// the started event so the watcher probes the same host.
	Host() string
	// Run runs script under the host's /bin/sh-compatible shell. A non-zero exit is an
	// Output, not an error; errors are failures to run at all.
	Run(ctx context.Context, script string) (Output, error)
	// Feed runs script by feeding it to /bin/sh on its standard input, so that its size
	// is not bound by the system's limit on an argument (128 KiB on Linux). The script
	// must keep its commands off that input (it is the script itself).
	Feed(ctx context.Context, script string) (Output, error)
	// WriteFile replaces path atomically (a temporary file renamed over it), making
	// missing parent directories.
	WriteFile(ctx context.Context, path string, data []byte, mode os.FileMode) error
	// Exists reports whether path exists.
	Exists(ctx context.Context, path string) (bool, error)
}

// Output is what a script printed and how it ended.
type Output struct {
	Stdout, Stderr []byte
	ExitCode       int
	// HostKey is the SHA256 fingerprint of the host key verified for the connection the
	// script ran over; "" on this host.
	HostKey string
}

// ok reports a zero exit.
func (o Output) ok() bool { return o.ExitCode == 0 }

// describe is the script's stderr (else stdout), trimmed, for errors and events.
func (o Output) describe() string {
	text := strings.TrimSpace(string(o.Stderr))
	if text == "" {
		text = strings.TrimSpace(string(o.Stdout))
	}
	if len(text) > 2000 {
		text = text[:2000] + "..."
	}
	return fmt.Sprintf("exit %d: %s", o.ExitCode, text)
}

// withVars prefixes script with shell assignments of vars, each value quoted, exported
// so static scripts the script runs see them too. Names are gridwire's own (GW_...).
func withVars(vars map[string]string, script string) string {
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

// LocalShell runs scripts on this host with /bin/sh, in the executor's environment (a
// batch system's clients need theirs, e.g. SLURM_CONF).
type LocalShell struct{}

// Host implements Shell.
func (LocalShell) Host() string {
	h, _ := os.Hostname()
	return h
}

// Run implements Shell.
func (LocalShell) Run(ctx context.Context, script string) (Output, error) {
	return runLocal(ctx, exec.CommandContext(ctx, "/bin/sh", "-c", script))
}

// Feed implements Shell.
func (LocalShell) Feed(ctx context.Context, script string) (Output, error) {
	cmd := exec.CommandContext(ctx, "/bin/sh", "-s")
	cmd.Stdin = strings.NewReader(script)
	// Once the shell is gone, what it started may still hold its output open (a START
	// that hangs): that must not hold the caller.
	cmd.WaitDelay = time.Second
	return runLocal(ctx, cmd)
}

// runLocal runs cmd to its end and collects its Output.
func runLocal(ctx context.Context, cmd *exec.Cmd) (Output, error) {
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	out := Output{Stdout: stdout.Bytes(), Stderr: stderr.Bytes()}
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

// WriteFile implements Shell.
func (LocalShell) WriteFile(_ context.Context, path string, data []byte, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return writeFileAtomic(path, data, mode)
}

// Exists implements Shell.
func (LocalShell) Exists(_ context.Context, path string) (bool, error) {
	_, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	return err == nil, err
}
