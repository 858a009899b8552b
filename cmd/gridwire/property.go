package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/pkg/httpapi"
	"github.com/gridwire/gridwire/services/property"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"
)

const propertyLong = `The property verbs are for the tasks of a DDS session, run inside them: a task that
declares properties finds in its environment where the gateway's task-side API is
(` + events.VarPropertyURL + `) and its own credential (` + events.VarPropertyToken + `).
A task writes the properties it declares with write or readwrite access, reads those it
declares with read or readwrite access, and sees a collection-scoped property only within
its own collection instance. Values are text of up to 256 characters.

  gridwire property put peer "$(hostname):5555"
  gridwire property get peer
  gridwire property watch --once peer      # wait for a value another task sets

replay is for operators: it rebuilds the live view of properties from the log.`

func propertyCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "property",
		Short: "set, read and watch DDS session properties from inside a task",
		Long:  propertyLong,
	}
	cmd.AddCommand(propertyPutCmd(e), propertyGetCmd(e), propertyWatchCmd(e), propertyReplayCmd(e))
	return cmd
}

// taskAPI is the task-side API as the task's environment names it.
type taskAPI struct {
	base  string // GRIDWIRE_PROPERTY_URL + the properties route
	token string
	http  *http.Client
}

func newTaskAPI(e *env) (*taskAPI, error) {
	base, token := e.getenv(events.VarPropertyURL), e.getenv(events.VarPropertyToken)
	if base == "" || token == "" {
		return nil, &cliError{code: "no_task_credential", exit: exitRefused, detail: fmt.Sprintf(
			"$%s and $%s are not set: run this inside a DDS task that declares properties", events.VarPropertyURL, events.VarPropertyToken)}
	}
	if u, err := url.Parse(base); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, usageErrorf("$%s %q is not an http:// address", events.VarPropertyURL, base)
	}
	return &taskAPI{base: strings.TrimSuffix(base, "/") + property.RouteList, token: token, http: &http.Client{}}, nil
}

// do makes one request and returns its body, or the API's error.
func (a *taskAPI) do(ctx context.Context, method, path, body string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, a.base+path, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+a.token)
	resp, err := a.http.Do(req)
	if err != nil {
		return nil, &unreachableError{server: strings.TrimSuffix(a.base, property.RouteList), attempts: 1, err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, httpapi.DecodeError(resp.StatusCode, b)
	}
	return b, nil
}

func propertyPutCmd(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "put KEY VALUE",
		Short: "set a property this task writes (VALUE - reads it from standard input)",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			api, err := newTaskAPI(e)
			if err != nil {
				return err
			}
			value := args[1]
			if value == "-" {
				b, err := io.ReadAll(io.LimitReader(cmd.InOrStdin(), 4*events.MaxPropertyValue+1))
				if err != nil {
					return err
				}
				value = strings.TrimSuffix(string(b), "\n")
			}
			_, err = api.do(cmd.Context(), http.MethodPut, "/"+url.PathEscape(args[0]), value)
			return err
		},
	}
}

func propertyGetCmd(e *env) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "get KEY",
		Short: "print the current value of a property this task reads",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			api, err := newTaskAPI(e)
			if err != nil {
				return err
			}
			b, err := api.do(cmd.Context(), http.MethodGet, "/"+url.PathEscape(args[0]), "")
			if err != nil {
				return err
			}
			var v property.Value
			if err := json.Unmarshal(b, &v); err != nil {
				return err
			}
			return printValue(e.stdout, v, asJSON, false)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the value with its writer, scope and sequence as JSON")
	return cmd
}

func printValue(w io.Writer, v property.Value, asJSON, withKey bool) error {
	switch {
	case asJSON:
		return json.NewEncoder(w).Encode(v)
	case withKey:
		_, err := fmt.Fprintf(w, "%s=%s\n", v.Key, v.Value)
		return err
	}
	_, err := fmt.Fprintln(w, v.Value)
	return err
}

func propertyWatchCmd(e *env) *cobra.Command {
	var asJSON, once bool
	cmd := &cobra.Command{
		Use:   "watch [KEY...]",
		Short: "print the values of properties this task reads, as other tasks set them",
		Long: "watch prints the current value of each property this task reads (or of the KEYs\n" +
			"named) and then every new value another task sets, one line each: the value alone\n" +
			"when one KEY is named, KEY=VALUE otherwise. It reconnects by itself, missing nothing.",
		RunE: func(cmd *cobra.Command, args []string) error {
			api, err := newTaskAPI(e)
			if err != nil {
				return err
			}
			q := url.Values{"watch": {"1"}}
			for _, k := range args {
				q.Add("key", k)
			}
			return api.watch(cmd.Context(), "?"+q.Encode(), func(v property.Value) (bool, error) {
				return once, printValue(e.stdout, v, asJSON, len(args) != 1)
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print each value with its writer, scope and sequence as JSON")
	cmd.Flags().BoolVar(&once, "once", false, "exit after the first value")
	return cmd
}

// watch follows the stream, calling got for each value until it says stop or ctx ends.
// A dropped stream is resumed from the last sequence seen; a refusal ends the watch.
func (a *taskAPI) watch(ctx context.Context, query string, got func(property.Value) (bool, error)) error {
	var last uint64
	wait := 100 * time.Millisecond
	for {
		stop, err := a.stream(ctx, query, &last, got)
		var api *httpapi.Error
		switch {
		case stop:
			return err
		case ctx.Err() != nil:
			return nil
		case errors.As(err, &api) && api.Status < 500:
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
		wait = min(2*wait, 5*time.Second)
	}
}

func (a *taskAPI) stream(ctx context.Context, query string, last *uint64, got func(property.Value) (bool, error)) (bool, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.base+query, nil)
	if err != nil {
		return true, err
	}
	req.Header.Set("Authorization", "Bearer "+a.token)
	if *last > 0 {
		req.Header.Set("Last-Event-ID", strconv.FormatUint(*last, 10))
	}
	resp, err := a.http.Do(req)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return false, httpapi.DecodeError(resp.StatusCode, b)
	}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var v property.Value
		if err := json.Unmarshal([]byte(data), &v); err != nil {
			return true, fmt.Errorf("the property stream: %w", err)
		}
		*last = max(*last, v.Seq)
		if stop, err := got(v); stop || err != nil {
			return true, err
		}
	}
	return false, sc.Err()
}

func propertyReplayCmd(e *env) *cobra.Command {
	f := &busFlags{}
	var bucket, live string
	cmd := &cobra.Command{
		Use:   "replay",
		Short: "rebuild the live view of properties from the log, and prove it equal to the live one",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := requireLog(f); err != nil {
				return err
			}
			sys, err := openSystem(cmd.Context(), e, f, true)
			if err != nil {
				return err
			}
			defer sys.close()
			view, upTo, err := property.Rebuild(cmd.Context(), sys.bus.JS, bucket)
			if err != nil {
				return err
			}
			fmt.Fprintf(e.stdout, "rebuilt %d properties up to seq %d into %s\n", len(view), upTo, bucket)
			if live == "" || live == bucket {
				return nil
			}
			c, err := property.Compare(cmd.Context(), sys.bus.JS, live, view, upTo)
			if errors.Is(err, jetstream.ErrBucketNotFound) {
				fmt.Fprintf(e.stderr, "gridwire: no live view %s to compare with (no read side has run)\n", live)
				return nil
			}
			if err != nil {
				return err
			}
			for _, d := range c.Differences {
				fmt.Fprintf(e.stdout, "differs: %s: live %s, rebuilt %s\n", d.Key, entrySummary(d.Live), entrySummary(d.Rebuilt))
			}
			if len(c.Differences) > 0 {
				fmt.Fprintf(e.stdout, "%d properties differ from the live view %s\n", len(c.Differences), live)
				return exitCode(exitFailed)
			}
			fmt.Fprintf(e.stdout, "identical to the live view %s (%d not folded there yet)\n", live, c.Behind)
			return nil
		},
	}
	f.register(cmd.Flags(), e)
	cmd.Flags().StringVar(&bucket, "bucket", property.Bucket+"-replay", "KV bucket to rebuild into (emptied first)")
	cmd.Flags().StringVar(&live, "live", property.Bucket, "live view to compare with ('' compares nothing)")
	return cmd
}

func entrySummary(en *property.Entry) string {
	if en == nil {
		return "missing"
	}
	return fmt.Sprintf("%q (seq %d)", en.Value, en.Seq)
}
