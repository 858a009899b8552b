// Command gridwire is the one binary: `serve` runs embedded NATS, every service and the
// HTTP API; each service also runs alone (`gridwire executor --cluster hpc1`); and the
// client verbs (submit, status, history, watch, ...) talk to a server over HTTP.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	var ec exitCode
	switch {
	case errors.As(err, &ec):
		os.Exit(int(ec))
	case err != nil:
		fmt.Fprintln(os.Stderr, "gridwire:", err)
		os.Exit(2)
	}
}

// exitCode is returned by verbs whose result is an exit status rather than an error
// (submit --wait with a job that did not succeed).
type exitCode int

func (e exitCode) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

// env is what every verb may use of the outside world.
type env struct {
	getenv func(string) string
	stdout io.Writer
	stderr io.Writer
}

// run is main without the process: testable with any args, environment and writers.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	e := &env{getenv: getenv, stdout: stdout, stderr: stderr}
	root := &cobra.Command{
		Use:           "gridwire",
		Short:         "an event-sourced job gateway on NATS JetStream",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.AddCommand(commands(e)...)
	return root.ExecuteContext(ctx)
}
