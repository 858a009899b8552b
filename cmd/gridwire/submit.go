package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"

	"github.com/gridwire/gridwire/events"
	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"
)

func submitCmd(e *env) *cobra.Command {
	f := &clientFlags{}
	var wait bool
	var format string
	cmd := &cobra.Command{
		Use:   "submit FILE...",
		Short: "submit job descriptions; prints the job IDs",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, files []string) error {
			return submit(cmd.Context(), e, f, files, format, wait)
		},
	}
	f.register(cmd.Flags(), e)
	cmd.Flags().BoolVar(&wait, "wait", false, "wait for every job's terminal state; exit 0 only if all succeeded")
	cmd.Flags().StringVar(&format, "format", "", "force the format (v3-json, v3-yaml, jrdl, dds)")
	return cmd
}

type accepted struct {
	Jobs   []string `json:"jobs"`
	Parent string   `json:"parent,omitempty"`
}

func submit(ctx context.Context, e *env, f *clientFlags, files []string, format string, wait bool) error {
	c := f.client()
	var runnable []string
	var all []accepted
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			return err
		}
		q := url.Values{"file": {filepath.Base(file)}}
		if format != "" {
			q.Set("format", format)
		}
		var acc accepted
		if err := c.do(ctx, http.MethodPost, "/v1/jobs?"+q.Encode(), bytes.NewReader(data), contentTypeOf(file), &acc); err != nil {
			return fmt.Errorf("%s: %w", file, err)
		}
		all = append(all, acc)
		for _, id := range acc.Jobs {
			if id != acc.Parent {
				runnable = append(runnable, id)
			}
			if !f.json && !wait {
				fmt.Fprintln(e.stdout, id)
			}
		}
	}
	if !wait {
		if f.json {
			return json.NewEncoder(e.stdout).Encode(all)
		}
		return nil
	}
	return waitAll(ctx, e, c, f.json, runnable)
}

// waitAll follows every job to its end and prints "ID STATE" (or JSON views).
func waitAll(ctx context.Context, e *env, c *client, asJSON bool, ids []string) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(64)
	ends := make([]jobView, len(ids))
	for i, id := range ids {
		g.Go(func() error {
			err := c.stream(gctx, "?job="+url.QueryEscape(id), func(ev events.Event) bool { return !ev.Name.Terminal() })
			if err != nil {
				return fmt.Errorf("following %s: %w", id, err)
			}
			v, err := c.job(gctx, id)
			ends[i] = v
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	failed := 0
	for _, v := range ends {
		if v.Status != string(events.StatusSucceeded) {
			failed++
		}
		if !asJSON {
			fmt.Fprintf(e.stdout, "%s %s\n", v.ID, v.Status)
		}
	}
	if asJSON {
		if err := json.NewEncoder(e.stdout).Encode(ends); err != nil {
			return err
		}
	}
	if failed > 0 {
		return exitCode(1)
	}
	return nil
}

func contentTypeOf(file string) string {
	switch filepath.Ext(file) {
	case ".json":
		return "application/json"
	case ".yaml", ".yml":
		return "application/yaml"
	case ".xml":
		return "application/xml"
	}
	return ""
}
