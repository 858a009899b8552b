package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
)

// topologyCmd groups what acts on a running DDS session's topology.
func topologyCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "topology",
		Short: "act on a running DDS session's topology",
	}
	cmd.AddCommand(topologyUpdateCmd(e))
	return cmd
}

// topologyUpdateCmd is gridwire topology update SESSION FILE: PUT
// /v1/sessions/{id}/topology with the new topology.
func topologyUpdateCmd(e *env) *cobra.Command {
	f := &clientFlags{}
	cmd := &cobra.Command{
		Use:   "update SESSION FILE",
		Short: "change a running session to a new topology: start the instances it adds, stop those it removes",
		Example: `  gridwire topology update 01JD3Z... topology-v2.xml
  gridwire topology update --json 01JD3Z... topology-v2.xml | jq .added`,
		Args:              cobra.ExactArgs(2),
		ValidArgsFunction: completeJobs(e, f),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.client(e)
			if err != nil {
				return err
			}
			doc, err := os.ReadFile(args[1])
			if err != nil {
				return usageErrorf("reading the topology: %v", err)
			}
			var up struct {
				Session string   `json:"session"`
				Added   []string `json:"added"`
				Removed []string `json:"removed"`
				Kept    int      `json:"kept"`
			}
			path := "/v1/sessions/" + url.PathEscape(args[0]) + "/topology?file=" + url.QueryEscape(filepath.Base(args[1]))
			if err := c.do(cmd.Context(), http.MethodPut, path, bytes.NewReader(doc), "application/xml", &up); err != nil {
				return err
			}
			if f.json {
				return json.NewEncoder(e.stdout).Encode(up)
			}
			fmt.Fprintf(e.stdout, "session %s: %d added, %d removed, %d kept\n", up.Session, len(up.Added), len(up.Removed), up.Kept)
			for _, id := range up.Added {
				fmt.Fprintf(e.stdout, "+ %s\n", id)
			}
			for _, id := range up.Removed {
				fmt.Fprintf(e.stdout, "- %s\n", id)
			}
			return nil
		},
	}
	f.register(cmd.Flags(), e)
	return cmd
}
