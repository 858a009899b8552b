package main

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// completeJobs completes a job ID argument with the newest jobs the server knows, each
// described by its name and state. A server out of reach completes nothing, quickly.
func completeJobs(e *env, f *clientFlags) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, prefix string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		base, err := serverURL(f.server)
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		ctx, cancel := context.WithTimeout(cmd.Context(), 3*time.Second)
		defer cancel()
		c := &client{base: base, token: f.token, http: &http.Client{}, retries: 1}
		var page struct {
			Jobs []jobView `json:"jobs"`
		}
		q := url.Values{"order": {"desc"}, "limit": {"200"}}
		if err := c.do(ctx, http.MethodGet, "/v1/jobs?"+q.Encode(), nil, "", &page); err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var out []cobra.Completion
		for _, v := range page.Jobs {
			if strings.HasPrefix(v.ID, strings.ToUpper(prefix)) {
				out = append(out, cobra.CompletionWithDesc(v.ID, strings.TrimSpace(v.Name+" "+v.Status)))
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}
