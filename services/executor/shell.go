package executor

import (
	"context"
	"io"

	"github.com/gridwire/gridwire/pkg/target"
)

// Shell runs scripts on one host of a target: this host (target.Local) or a remote one
// over a pooled SSH connection (target.SSH).
type Shell interface {
	// Host names the host as the cluster config does ("" parts filled in), recorded in
	// the started event so the watcher probes the same host.
	Host() string
	// Run runs script under the host's /bin/sh-compatible shell. A non-zero exit is an
	// Output, not an error; errors are failures to run at all.
	Run(ctx context.Context, script string) (target.Output, error)
	// Feed runs script by feeding it to /bin/sh on its standard input, so that its size
	// is not bound by the system's limit on an argument (128 KiB on Linux). The script
	// must keep its commands off that input (it is the script itself).
	Feed(ctx context.Context, script string) (target.Output, error)
	// Stream is Feed with the script's standard output written as it comes (Output's
	// Stdout is then nil): stdout is called once, before the script runs, with the
	// fingerprint of the host key the connection was verified by ("" on this host), and
	// returns the writer of the output. Writes may come after Stream returned when ctx
	// ended first.
	Stream(ctx context.Context, script string, stdout func(hostKey string) io.Writer) (target.Output, error)
}
