package main

import (
	"fmt"

	"github.com/gridwire/gridwire/services/incarnator"
	"github.com/spf13/cobra"
)

func profilesCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{Use: "profiles", Short: "work with GPE OS profile directories"}
	cmd.AddCommand(&cobra.Command{
		Use:   "check [DIR]",
		Short: "validate a profile directory (default: the built-in profiles); every problem with file:line:col",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := ""
			if len(args) == 1 {
				dir = args[0]
			}
			set, err := incarnator.LoadProfiles(dir)
			if err != nil {
				fmt.Fprintln(e.stderr, err)
				return exitCode(exitInvalid)
			}
			if dir == "" {
				dir = "built-in profiles"
			}
			fmt.Fprintf(e.stdout, "%s: %d profiles OK %v (%s)\n", dir, len(set.Names()), set.Names(), set.Hash)
			return nil
		},
	})
	return cmd
}
