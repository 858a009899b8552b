package main

import (
	"encoding/json"
	"fmt"

	"github.com/gridwire/gridwire/services/readside"
	"github.com/spf13/cobra"
)

func auditCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "check the log's job histories",
	}
	cmd.AddCommand(auditVerifyCmd(e), auditInvariantsCmd(e))
	return cmd
}

func auditVerifyCmd(e *env) *cobra.Command {
	f := &busFlags{}
	var all, asJSON bool
	cmd := &cobra.Command{
		Use:   "verify [ID | --all]",
		Short: "re-fold job histories and check every hash chain; report each job's first broken link",
		Long: "verify reads a job's events (or every job's, with --all) from the log and checks that each\n" +
			"decodes, is stored under its job's subject, links to the job's previous event by prevseq and\n" +
			"by prevhash (the SHA-256 of that event's stored body), carries a signature that holds for a key\n" +
			"the config's signing.keys (or the key directory) trusts, whose role may write that event, and is\n" +
			"accepted by the fold. Events stored before the log's first signed one are counted as unsigned;\n" +
			"an unsigned event after it is broken. It exits 1 when a history is broken.",
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if all == (len(args) == 1) {
				return usageErrorf("audit verify: name one job ID or --all")
			}
			id := ""
			if len(args) == 1 {
				id = args[0]
			}
			if err := requireLog(f); err != nil {
				return err
			}
			sys, err := openSystem(cmd.Context(), e, f, true)
			if err != nil {
				return err
			}
			defer sys.close()
			rep, err := readside.Audit(cmd.Context(), sys.bus.JS, id, &sys.keys.ring)
			if err != nil {
				return err
			}
			if id != "" && rep.Jobs == 0 {
				return notFoundErrorf("audit verify: no job %s in the log", id)
			}
			if asJSON {
				if err := json.NewEncoder(e.stdout).Encode(rep); err != nil {
					return err
				}
			} else {
				for _, b := range rep.Broken {
					fmt.Fprintf(e.stdout, "BROKEN %s\n", b)
				}
				fmt.Fprintf(e.stdout, "verified %d jobs, %d events up to seq %d: %d broken\n", rep.Jobs, rep.Events, rep.Seq, len(rep.Broken))
				if rep.Unsigned > 0 {
					fmt.Fprintf(e.stdout, "%d unsigned events stored before the log's first signed one (seq %d; 0: none yet)\n", rep.Unsigned, rep.SignedFrom)
				}
			}
			if !rep.OK() {
				return exitCode(1)
			}
			return nil
		},
	}
	f.register(cmd.Flags(), e)
	cmd.Flags().BoolVar(&all, "all", false, "verify every job in the log")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON")
	return cmd
}
