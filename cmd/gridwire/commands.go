package main

import "github.com/spf13/cobra"

// commands is the table of verbs, by help group. A new verb lives in its own file and
// adds one line here.
func commands(e *env) []*cobra.Command {
	groups := []struct {
		id   string
		cmds []*cobra.Command
	}{
		{groupFollow, []*cobra.Command{submitCmd(e), listCmd(e), statusCmd(e), logsCmd(e), watchCmd(e), historyCmd(e)}},
		{groupOperate, []*cobra.Command{
			controlCmd(e, "cancel", "cancel a job: it never starts, or its run is aborted"),
			controlCmd(e, "hold", "hold a queued or running job on its target"),
			controlCmd(e, "resume", "release a held job"),
			propertyCmd(e),
			topologyCmd(e),
		}},
		{groupOffline, []*cobra.Command{normalizeCmd(e), renderCmd(e), profilesCmd(e), replayCmd(e), auditCmd(e), keysCmd(e), benchCmd(e)}},
		{groupServe, []*cobra.Command{serveCmd(e), serviceCmd(e, "ingest"), serviceCmd(e, "incarnator"),
			serviceCmd(e, "executor"), serviceCmd(e, "stager"), serviceCmd(e, "watcher"), serviceCmd(e, "readside"), ptpProxyCmd(e),
			transferPluginCmd(e)}},
	}
	var all []*cobra.Command
	for _, g := range groups {
		for _, c := range g.cmds {
			c.GroupID = g.id
			usageArgs(c)
			all = append(all, c)
		}
	}
	v := versionCmd(e)
	usageArgs(v)
	return append(all, v)
}

// usageArgs makes every argument-count error of cmd and its subcommands a usage error
// (exit status 2), like a bad flag.
func usageArgs(cmd *cobra.Command) {
	if check := cmd.Args; check != nil {
		cmd.Args = func(c *cobra.Command, args []string) error {
			if err := check(c, args); err != nil {
				return usageErrorf("%s: %v (see `%s --help`)", c.CommandPath(), err, c.CommandPath())
			}
			return nil
		}
	}
	for _, sub := range cmd.Commands() {
		usageArgs(sub)
	}
}
