package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/spf13/cobra"
)

// controlCmd is `gridwire cancel|hold|resume ID`: it asks the server to append the
// request event; the job's executors carry it out and record the result in its history.
func controlCmd(e *env, verb, short string) *cobra.Command {
	f := &clientFlags{}
	var reason string
	cmd := &cobra.Command{
		Use:               verb + " ID",
		Short:             short,
		Example:           "  gridwire " + verb + " 01JD3Z... --reason \"asked by the user\"",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeJobs(e, f),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.client(e)
			if err != nil {
				return err
			}
			body, err := json.Marshal(map[string]string{"reason": reason})
			if err != nil {
				return err
			}
			var reply struct {
				Job     string `json:"job"`
				Request string `json:"request"`
				Status  string `json:"status"`
			}
			path := "/v1/jobs/" + url.PathEscape(args[0]) + "/" + verb
			if err := c.do(cmd.Context(), http.MethodPost, path, strings.NewReader(string(body)), "application/json", &reply); err != nil {
				return err
			}
			if f.json {
				return json.NewEncoder(e.stdout).Encode(reply)
			}
			fmt.Fprintf(e.stdout, "%s requested for job %s (now %s); `gridwire history %s` shows the outcome\n",
				verb, reply.Job, reply.Status, reply.Job)
			return nil
		},
	}
	f.register(cmd.Flags(), e)
	cmd.Flags().StringVar(&reason, "reason", "", "why, recorded with the request")
	return cmd
}
