// Command gridwire is the one binary: `serve` runs embedded NATS, every service and the
// HTTP API; each service also runs alone (`gridwire executor --cluster hpc1`); and the
// client verbs (submit, status, history, watch, ...) talk to a server over HTTP.
package main

import (
	"context"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"github.com/spf13/cobra"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	status := runStatus(ctx, argsOf(os.Args), os.Getenv, os.Stdout, os.Stderr)
	stop()
	os.Exit(status)
}

// ptpProxyName is the name under which the binary acts as `gridwire ptp-proxy`: Eclipse
// PTP launches a proxy as one program path followed by its own flags, with no room for a
// verb before them, so a link of this name to gridwire is what PTP is given.
const ptpProxyName = "gridwire-ptp-proxy"

// argsOf is the verb and flags of a command line, the verb implied by the program name.
func argsOf(argv []string) []string {
	if len(argv) > 0 && filepath.Base(argv[0]) == ptpProxyName {
		return append([]string{"ptp-proxy"}, argv[1:]...)
	}
	return argv[1:]
}

// env is what every verb may use of the outside world.
type env struct {
	getenv func(string) string
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer

	stdinOnce sync.Once // a description given as "-" is read from stdin once, and kept
	stdinData []byte
	stdinErr  error
}

// run is main without the process: testable with any args, environment and writers.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	_, err := execute(ctx, args, getenv, stdout, stderr)
	return err
}

// runStatus runs like run, prints the error (as JSON when the verb was given --json)
// and returns the process's exit status.
func runStatus(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	return runStatusIn(ctx, args, getenv, os.Stdin, stdout, stderr)
}

// runStatusIn is runStatus with a standard input of the caller's.
func runStatusIn(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) int {
	cmd, err := executeIn(ctx, args, getenv, stdin, stdout, stderr)
	asJSON := false
	if cmd != nil {
		if f := cmd.Flags().Lookup("json"); f != nil {
			asJSON = f.Value.String() == "true"
		}
	}
	return report(stderr, err, asJSON)
}

// The help's groups of verbs.
const (
	groupFollow  = "follow"
	groupOperate = "operate"
	groupOffline = "offline"
	groupServe   = "serve"
)

const rootLong = `gridwire accepts job descriptions (JRDL, DDS topologies, JSDL, the v3 task description
in JSON or YAML), runs them on local hosts, SSH hosts or batch clusters, and records every
fact about each job in an event log on NATS JetStream.

The client verbs talk to a server's HTTP API (--server, default $GRIDWIRE_SERVER, else
http://127.0.0.1:8080). A job's standard output and error are kept in its working
directory on the target, under .gridwire/stdout and .gridwire/stderr: ` + "`gridwire logs ID`" + `
shows them from wherever the job ran.

Shell completion (verbs, flags and job IDs, which it asks the server for):
  source <(gridwire completion bash)     # or zsh, fish, powershell`

const rootExample = `  gridwire serve &                          # everything in one process, data in ./.gridwire-data
  gridwire submit --follow examples/hello.json
  gridwire list --state running,failed
  gridwire logs --follow 01JD3Z...          # the job's output, live
  gridwire cancel 01JD3Z... --reason "wrong input"`

// Verbs are listed in the order of commands(), most used first. Set once: it is
// cobra's global, and tests build many roots at once.
func init() { cobra.EnableCommandSorting = false }

func newRoot(e *env) *cobra.Command {
	root := &cobra.Command{
		Use:                        "gridwire",
		Short:                      "an event-sourced job gateway on NATS JetStream",
		Long:                       rootLong,
		Example:                    rootExample,
		SilenceUsage:               true,
		SilenceErrors:              true,
		SuggestionsMinimumDistance: 2,
	}
	root.AddGroup(
		&cobra.Group{ID: groupFollow, Title: "Submit and follow jobs:"},
		&cobra.Group{ID: groupOperate, Title: "Operate on jobs:"},
		&cobra.Group{ID: groupOffline, Title: "Offline tools (no server needed):"},
		&cobra.Group{ID: groupServe, Title: "Run services:"},
	)
	root.SetUsageTemplate(root.UsageTemplate() + exitHelp)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageErrorf("%v", err) })
	root.AddCommand(commands(e)...)
	refuseUnknownVerbs(root)
	return root
}

// refuseUnknownVerbs makes the root and every verb that only groups others (audit,
// profiles, topology, ...) refuse a word that is none of their verbs, with exit 2 and
// the nearest ones, where cobra would print the help and succeed: a script's typo must
// not pass for done.
func refuseUnknownVerbs(cmd *cobra.Command) {
	for _, sub := range cmd.Commands() {
		refuseUnknownVerbs(sub)
	}
	if !cmd.HasSubCommands() || cmd.Runnable() {
		return
	}
	cmd.Args = cobra.ArbitraryArgs
	cmd.SuggestionsMinimumDistance = 2
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if len(args) == 0 {
			return cmd.Help()
		}
		msg := "unknown command %q for %s; `%s --help` lists them"
		if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
			msg += "; did you mean " + strings.Join(s, " or ") + "?"
		}
		return usageErrorf(msg, args[0], cmd.CommandPath(), cmd.CommandPath())
	}
}

func execute(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) (*cobra.Command, error) {
	return executeIn(ctx, args, getenv, os.Stdin, stdout, stderr)
}

// executeIn is execute with a standard input of the caller's.
func executeIn(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) (*cobra.Command, error) {
	e := &env{getenv: getenv, stdin: stdin, stdout: stdout, stderr: stderr}
	root := newRoot(e)
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	return root.ExecuteContextC(ctx)
}
