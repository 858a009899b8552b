package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gridwire/gridwire/events"
	"github.com/spf13/cobra"
)

type listFlags struct {
	states    []string
	cluster   string
	submitter string
	since     string
	limit     int
	all       bool
	watch     bool
}

func listCmd(e *env) *cobra.Command {
	f := &clientFlags{}
	l := &listFlags{}
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "list jobs, newest first: ID, name, state, cluster, exit code, age and reason",
		Example: `  gridwire list
  gridwire list --state failed --since 2h
  gridwire list --cluster hpc1 --all --json | jq -r '.[].id'
  gridwire list --watch                   # then one line per job as it changes`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := f.client(e)
			if err != nil {
				return err
			}
			q, err := l.query(time.Now())
			if err != nil {
				return err
			}
			return list(cmd.Context(), e, c, f, l, q)
		},
	}
	f.register(cmd.Flags(), e)
	fs := cmd.Flags()
	fs.StringSliceVar(&l.states, "state", nil, "only jobs in these states, comma-separated: "+strings.Join(stateNames(), ", "))
	_ = cmd.RegisterFlagCompletionFunc("state", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return stateNames(), cobra.ShellCompDirectiveNoFileComp
	})
	fs.StringVar(&l.cluster, "cluster", "", "only jobs of this cluster")
	fs.StringVar(&l.submitter, "submitter", "", "only jobs of this submitter (principal)")
	fs.StringVar(&l.since, "since", "", "only jobs submitted since: a duration back (90m, 2h) or an RFC 3339 time")
	fs.IntVar(&l.limit, "limit", 50, "at most this many jobs (1 to 1000)")
	fs.BoolVar(&l.all, "all", false, "every matching job, page after page (ignores --limit)")
	fs.BoolVarP(&l.watch, "watch", "w", false, "after the list, print each matching job again as it changes, until interrupted")
	return cmd
}

// noMatch says that no job matched, and which filters it matched against.
func (l *listFlags) noMatch() string {
	var by []string
	if len(l.states) > 0 {
		by = append(by, "--state "+strings.Join(l.states, ","))
	}
	for _, f := range [][2]string{{"--cluster", l.cluster}, {"--submitter", l.submitter}, {"--since", l.since}} {
		if f[1] != "" {
			by = append(by, f[0]+" "+f[1])
		}
	}
	if len(by) == 0 {
		return "no jobs yet"
	}
	return "no job matches " + strings.Join(by, " ")
}

// stateNames are the job states as --state takes them.
func stateNames() []string {
	var names []string
	for _, s := range events.Statuses() {
		names = append(names, strings.ToLower(string(s)))
	}
	return names
}

// query turns the flags into the API's query string.
func (l *listFlags) query(now time.Time) (url.Values, error) {
	q := url.Values{"order": {"desc"}}
	for _, s := range l.states {
		if !events.Status(strings.ToUpper(s)).Known() {
			return nil, usageErrorf("--state %q: not a job state (one of %s)", s, strings.Join(stateNames(), ", "))
		}
	}
	if len(l.states) > 0 {
		q.Set("state", strings.ToUpper(strings.Join(l.states, ",")))
	}
	if l.cluster != "" {
		q.Set("cluster", l.cluster)
	}
	if l.submitter != "" {
		q.Set("submitter", l.submitter)
	}
	if l.since != "" {
		t, err := pastTime("--since", l.since, now)
		if err != nil {
			return nil, err
		}
		q.Set("since", t.UTC().Format(time.RFC3339Nano))
	}
	if l.limit < 1 || l.limit > 1000 {
		return nil, usageErrorf("--limit %d: want 1 to 1000", l.limit)
	}
	q.Set("limit", strconv.Itoa(l.limit))
	if l.all {
		q.Set("limit", "1000")
	}
	return q, nil
}

// pastTime reads a flag's moment: a duration back from now (90m, 2h) or an RFC 3339 time.
func pastTime(flag, s string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(s); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	return time.Time{}, usageErrorf("%s %q: want a duration (90m, 2h) or an RFC 3339 time", flag, s)
}

// jobPage is one page of GET /v1/jobs.
type jobPage struct {
	Jobs []jobView `json:"jobs"`
	Next string    `json:"next"`
	Seq  uint64    `json:"seq"`
}

func (c *client) jobs(ctx context.Context, q url.Values) (jobPage, error) {
	var p jobPage
	err := c.do(ctx, http.MethodGet, "/v1/jobs?"+q.Encode(), nil, "", &p)
	return p, err
}

func list(ctx context.Context, e *env, c *client, f *clientFlags, l *listFlags, q url.Values) error {
	page, err := c.jobs(ctx, q)
	if err != nil {
		return err
	}
	views, seq := page.Jobs, page.Seq
	for l.all && page.Next != "" {
		q.Set("after", page.Next)
		if page, err = c.jobs(ctx, q); err != nil {
			return err
		}
		views = append(views, page.Jobs...)
	}
	clk := newClock(f.utc)
	if f.json && !l.watch {
		return json.NewEncoder(e.stdout).Encode(views)
	}
	t := &jobTable{w: e.stdout, clk: clk, json: f.json, shown: map[string]string{}}
	t.print(views...)
	if !f.json && !l.all && page.Next != "" {
		fmt.Fprintf(e.stderr, "(the first %d; --all or --limit for more)\n", len(views))
	}
	if !f.json && len(views) == 0 {
		fmt.Fprintln(e.stderr, l.noMatch())
	}
	if !l.watch {
		return nil
	}
	err = watchJobs(ctx, c, seq, l, t)
	if errors.Is(err, context.Canceled) {
		return nil // interrupted by the user
	}
	return err
}

// watchJobs follows the log from the table's stamp and prints each matching job again
// when it changes state.
func watchJobs(ctx context.Context, c *client, seq uint64, l *listFlags, t *jobTable) error {
	q := url.Values{}
	if seq > 0 {
		q.Set("after", strconv.FormatUint(seq, 10))
	}
	var fetchErr error
	err := c.stream(ctx, q, func(ev events.Event) bool {
		v, err := c.job(ctx, ev.JobID)
		if err != nil {
			fetchErr = err
			return false
		}
		if l.matches(v) {
			t.clk.now = time.Now()
			t.print(v)
		}
		return true
	})
	return errors.Join(err, fetchErr)
}

func (l *listFlags) matches(v jobView) bool {
	switch {
	case len(l.states) > 0 && !slices.ContainsFunc(l.states, func(s string) bool { return strings.EqualFold(s, v.Status) }):
		return false
	case l.cluster != "" && v.Cluster != l.cluster:
		return false
	case l.submitter != "" && v.Submitter != l.submitter:
		return false
	}
	return true
}

// jobTable prints jobs as table rows (or JSON lines), each again only when it changed.
type jobTable struct {
	w      io.Writer
	clk    clock
	json   bool
	header bool
	shown  map[string]string // job ID -> the row last printed
}

func (t *jobTable) print(views ...jobView) {
	if t.json {
		enc := json.NewEncoder(t.w)
		for _, v := range views {
			if key := v.Status + fmt.Sprint(v.Events); t.shown[v.ID] != key {
				t.shown[v.ID] = key
				_ = enc.Encode(v)
			}
		}
		return
	}
	// Fixed columns, so rows printed later (--watch) line up with the first ones.
	const format = "%-26s  %-20s  %-11s  %-12s  %4s  %5s  %s\n"
	if !t.header {
		fmt.Fprintf(t.w, format, "ID", "NAME", "STATE", "CLUSTER", "EXIT", "AGE", "REASON")
		t.header = true
	}
	for _, v := range views {
		exit := ""
		if v.ExitCode != nil {
			exit = strconv.Itoa(*v.ExitCode)
		}
		state := v.Status + "\t" + exit + "\t" + v.Reason
		if t.shown[v.ID] == state {
			continue
		}
		t.shown[v.ID] = state
		fmt.Fprintf(t.w, format, v.ID, cutName(v.label(), 20), v.Status, cut(v.Cluster, 12), exit,
			age(t.clk.now.Sub(v.SubmittedAt)), cut(v.Reason, 80))
	}
}

// cutName cuts a job's name to n runes as cut does, except a path (a topology's task,
// main/group/task_3, or a JRDL job's): its end tells siblings apart, so it keeps the end.
func cutName(s string, n int) string { return cutKeeping(s, n, strings.Contains(s, "/")) }

// cut shortens s to n runes, marking the cut.
func cut(s string, n int) string { return cutKeeping(s, n, false) }

// cutKeeping puts s on one line and shortens it to n runes, keeping its start, or its
// end when keepEnd, and marking the cut.
func cutKeeping(s string, n int, keepEnd bool) string {
	s = oneLine(s)
	r := []rune(s)
	switch {
	case len(r) <= n:
		return s
	case keepEnd:
		return "…" + string(r[len(r)-n+1:])
	}
	return string(r[:n-1]) + "…"
}
