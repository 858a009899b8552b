package main

import "github.com/spf13/cobra"

// commands is the table of verbs. A new verb lives in its own file and adds one line here.
func commands(e *env) []*cobra.Command {
	return []*cobra.Command{
		serveCmd(e),
		serviceCmd(e, "ingest"),
		serviceCmd(e, "incarnator"),
		serviceCmd(e, "executor"),
		serviceCmd(e, "stager"),
		serviceCmd(e, "watcher"),
		submitCmd(e),
		statusCmd(e),
		historyCmd(e),
		watchCmd(e),
		normalizeCmd(e),
		benchCmd(e),
		renderCmd(e),
		profilesCmd(e),
		controlCmd(e, "cancel", "cancel a job: it never starts, or its run is aborted"),
		controlCmd(e, "hold", "hold a queued or running job on its target"),
		controlCmd(e, "resume", "release a held job"),
		replayCmd(e),
		auditCmd(e),
	}
}
