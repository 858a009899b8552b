package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/pkg/httpapi"
	"github.com/spf13/cobra"
)

func logsCmd(e *env) *cobra.Command {
	f := &clientFlags{}
	var follow, stderr bool
	var tail int
	cmd := &cobra.Command{
		Use:   "logs ID",
		Short: "print what a job wrote on its standard output (or error), from wherever it ran",
		Long: "logs prints a job's standard output, or with --stderr its standard error, as the program\n" +
			"wrote them: they are kept in the job's working directory on its target, under\n" +
			".gridwire/stdout and .gridwire/stderr, and the server reads them there (on this host, over\n" +
			"SFTP from an SSH host, or from a batch cluster's shared file system). With --follow it\n" +
			"prints the output as it grows, until the job has ended.",
		Example: `  gridwire logs 01JD3Z...
  gridwire logs --follow 01JD3Z...
  gridwire logs --stderr --tail 20 01JD3Z...`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeJobs(e, f),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.client(e)
			if err != nil {
				return err
			}
			if tail < 0 {
				return usageErrorf("--tail %d: must be 0 (everything) or more", tail)
			}
			stream := "stdout"
			if stderr {
				stream = "stderr"
			}
			if follow {
				if err := sayWhileNotStarted(cmd.Context(), e, c, args[0]); err != nil {
					return err
				}
			}
			err = c.logs(cmd.Context(), args[0], stream, tail, follow, e.stdout)
			if errors.Is(err, context.Canceled) {
				return nil // interrupted by the user
			}
			return err
		},
	}
	f.register(cmd.Flags(), e)
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "print the output as it grows, until the job has ended")
	cmd.Flags().BoolVar(&stderr, "stderr", false, "standard error instead of standard output")
	cmd.Flags().IntVarP(&tail, "tail", "n", 0, "only the last N lines")
	return cmd
}

// sayWhileNotStarted tells the user, once, when the job has not run yet: following its
// output then waits for it.
func sayWhileNotStarted(ctx context.Context, e *env, c *client, id string) error {
	v, err := c.job(ctx, id)
	if err != nil {
		return err
	}
	switch events.Status(v.Status) {
	case events.StatusSubmitted, events.StatusIncarnated, events.StatusStagingIn, events.StatusQueued:
		fmt.Fprintf(e.stderr, "gridwire: job %s is %s; its output follows once it runs\n", id, v.Status)
	}
	return nil
}

// tailBytes is how far back from the end --tail N reads: enough for N ordinary lines.
func tailBytes(lines int) int64 { return int64(lines) * 512 }

// logs copies a job's output to w. A dropped connection while following is resumed
// from the bytes already printed (bounded, announced, like the event stream).
func (c *client) logs(ctx context.Context, id, stream string, tail int, follow bool, w io.Writer) error {
	offset := int64(0)
	if tail > 0 {
		offset = -tailBytes(tail)
	}
	var out io.Writer = w
	var tl *tailWriter
	if tail > 0 && !follow {
		tl = &tailWriter{lines: tail}
		out = tl
	}
	failures := 0
	for {
		n, start, err := c.logsOnce(ctx, id, stream, offset, follow, out, tail)
		if err == nil || !follow || ctx.Err() != nil {
			if tl != nil {
				_, _ = w.Write(tl.bytes())
			}
			return err
		}
		var apiErr *httpapi.Error
		if errors.As(err, &apiErr) {
			return err
		}
		if n > 0 || start >= 0 {
			failures = 0
		}
		if n > 0 {
			offset = start + n
		}
		if failures++; failures >= max(c.retries, 1) {
			return &unreachableError{server: c.base, attempts: failures, err: err}
		}
		c.announce(err, failures, max(c.retries, 1), c.backoff)
		if err := sleep(ctx, c.backoff); err != nil {
			return err
		}
	}
}

// logsOnce reads one response of output. It returns how many bytes it copied and the
// offset the body started at (-1: no answer).
func (c *client) logsOnce(ctx context.Context, id, stream string, offset int64, follow bool, w io.Writer, tail int) (int64, int64, error) {
	q := url.Values{"stream": {stream}}
	if offset != 0 {
		q.Set("offset", strconv.FormatInt(offset, 10))
	}
	if follow {
		q.Set("follow", "true")
	}
	req, err := c.request(ctx, http.MethodGet, "/v1/jobs/"+url.PathEscape(id)+"/logs?"+q.Encode(), nil, "")
	if err != nil {
		return 0, -1, err
	}
	resp, err := c.send(req)
	if err != nil {
		return 0, -1, err
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		data, _ := io.ReadAll(resp.Body)
		return 0, -1, httpapi.DecodeError(resp.StatusCode, data)
	}
	start, _ := strconv.ParseInt(resp.Header.Get("Gridwire-Output-Offset"), 10, 64)
	body := io.Reader(resp.Body)
	if offset < 0 && follow && tail > 0 {
		body = &skipLines{r: resp.Body, keep: tail} // the last lines of what was there, then all that comes
	}
	n, err := io.Copy(w, body)
	if err == nil && follow && ctx.Err() == nil {
		// A followed body ends when the job has ended and all is sent; the server says
		// so by ending it cleanly. Anything else is a dropped connection.
		return n, start, nil
	}
	return n, start, err
}

// tailWriter keeps the last lines written to it.
type tailWriter struct {
	lines int
	buf   bytes.Buffer
}

func (t *tailWriter) Write(p []byte) (int, error) { return t.buf.Write(p) }

func (t *tailWriter) bytes() []byte { return lastLines(t.buf.Bytes(), t.lines) }

// lastLines is the last n lines of b (a final line without a newline counts).
func lastLines(b []byte, n int) []byte {
	end := len(bytes.TrimSuffix(b, []byte("\n")))
	for k := 0; k < n; k++ {
		j := bytes.LastIndexByte(b[:end], '\n')
		if j < 0 {
			return b
		}
		end = j
	}
	return b[end+1:]
}

// skipLines passes on the last keep lines of what its first read returned, then all.
type skipLines struct {
	r    io.Reader
	keep int
	done bool
}

func (s *skipLines) Read(p []byte) (int, error) {
	if s.done {
		return s.r.Read(p)
	}
	s.done = true
	n, err := s.r.Read(p)
	kept := lastLines(p[:n], s.keep)
	m := copy(p, kept)
	return m, err
}

// stderrTail is the last lines a job wrote on its standard error, "" when none can be
// read: what a failed job's one line of outcome is followed by.
func (c *client) stderrTail(ctx context.Context, id string, lines int) string {
	var buf bytes.Buffer
	quiet := *c
	quiet.retries, quiet.log = 1, nil
	if _, _, err := quiet.logsOnce(ctx, id, "stderr", -tailBytes(lines), false, &buf, lines); err != nil {
		return ""
	}
	return strings.TrimRight(string(lastLines(buf.Bytes(), lines)), "\n")
}
