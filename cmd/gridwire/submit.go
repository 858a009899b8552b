package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/services/ingest"
	"github.com/gridwire/gridwire/services/stager"
	"github.com/schollz/progressbar/v3"
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
		body, ctype, err := withUploads(ctx, e, c, file, data, format)
		if err != nil {
			return fmt.Errorf("%s: %w", file, err)
		}
		if body != nil {
			q.Set("format", ingest.FormatCanonical)
			data = body
		} else {
			ctype = contentTypeOf(file)
		}
		var acc accepted
		if err := c.do(ctx, http.MethodPost, "/v1/jobs?"+q.Encode(), bytes.NewReader(data), ctype, &acc); err != nil {
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
			err := c.stream(gctx, url.Values{"job": {id}}, func(ev events.Event) bool { return !ev.Name.Terminal() })
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

// withUploads uploads the local input files a description names (relative to the
// description's directory) and returns the canonical jobs to submit instead of the
// document; nil when there is nothing to upload or the document does not parse here
// (the server then reports its problems).
func withUploads(ctx context.Context, e *env, c *client, file string, data []byte, format string) ([]byte, string, error) {
	jobs, err := ingest.Parse(filepath.Base(file), data, ingest.ParseOptions{Format: format, ContentType: contentTypeOf(file)})
	if err != nil || !slices.ContainsFunc(jobs, stager.LocalInputs) {
		return nil, "", nil
	}
	put := func(ctx context.Context, name string, r io.Reader) error {
		return c.do(ctx, http.MethodPut, "/v1/uploads/"+escapeSegments(name), r, "application/octet-stream", nil)
	}
	opt := stager.UploadOptions{Dir: filepath.Dir(file), Wrap: func(name string, size int64, r io.Reader) io.Reader {
		bar := progressbar.NewOptions64(size, progressbar.OptionSetWriter(e.stderr), progressbar.OptionShowBytes(true),
			progressbar.OptionSetDescription("uploading "+filepath.Base(name)), progressbar.OptionOnCompletion(func() {
				fmt.Fprintln(e.stderr)
			}))
		pr := progressbar.NewReader(r, bar)
		return &pr
	}}
	for i := range jobs {
		if _, err := stager.UploadInputsWith(ctx, put, &jobs[i], opt); err != nil {
			return nil, "", err
		}
	}
	body, err := json.Marshal(jobs)
	return body, "application/json", err
}

func escapeSegments(name string) string {
	segs := strings.Split(name, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return strings.Join(segs, "/")
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
