package main

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/gridwire/gridwire/services/ingest"
	"github.com/spf13/cobra"
)

func normalizeCmd(e *env) *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "normalize FILE...",
		Short: "print the canonical jobs of each file (- is standard input) as JSON, one array per file",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, files []string) error {
			if err := oneStdin(files); err != nil {
				return err
			}
			var bad []error
			enc := json.NewEncoder(e.stdout)
			enc.SetIndent("", "  ")
			for _, file := range files {
				data, err := e.readInput(file)
				if err != nil {
					bad = append(bad, err)
					continue
				}
				jobs, err := ingest.Parse(shown(file), data, ingest.ParseOptions{Format: format, ContentType: contentTypeOf(file)})
				if err != nil {
					bad = append(bad, err)
					continue
				}
				if err := enc.Encode(jobs); err != nil {
					return err
				}
			}
			if len(bad) > 0 {
				fmt.Fprintln(e.stderr, errors.Join(bad...))
				if len(files) > 1 {
					fmt.Fprintf(e.stderr, "%d of %d files invalid\n", len(bad), len(files))
				}
				return exitCode(exitInvalid)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&format, "format", "", formatHelp())
	return cmd
}
