package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/gridwire/gridwire/events"
	"github.com/spf13/cobra"
)

func statusCmd(e *env) *cobra.Command {
	f := &clientFlags{}
	var asOf string
	cmd := &cobra.Command{
		Use:   "status ID",
		Short: "show a job's state, exit code, reason, cluster and times (now, or --as-of a past moment)",
		Example: `  gridwire status 01JD3Z...
  gridwire status --json 01JD3Z... | jq .exit_code
  gridwire status --as-of 2h 01JD3Z...      # the state it had two hours ago, folded from its history`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeJobs(e, f),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.client(e)
			if err != nil {
				return err
			}
			if asOf != "" {
				t, err := pastTime("--as-of", asOf, time.Now())
				if err != nil {
					return err
				}
				return statusAsOf(cmd.Context(), e, c, f, args[0], t)
			}
			v, err := c.job(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if f.json {
				return json.NewEncoder(e.stdout).Encode(v)
			}
			if v.Kind != string(events.KindGroup) {
				return printStatus(e, v, newClock(f.utc))
			}
			// A group: its children now, so the summary line says what the list below
			// it shows (the record's own summary is as of its last move, which can be
			// hours ago while its children run).
			kids, err := childrenOf(cmd.Context(), c, v.ID)
			if err != nil {
				return err
			}
			var gone map[string]bool
			if len(kids) > v.Children {
				// A topology update took some out of the session: they still name it
				// as their parent, but are not its children now. Its history says which.
				evs, err := c.history(cmd.Context(), v.ID)
				if err != nil {
					return err
				}
				gone = removedFromSession(evs)
			}
			members, removed := splitRemoved(kids, gone)
			v.Group = liveSummary(v.Children, members)
			if err := printStatus(e, v, newClock(f.utc)); err != nil {
				return err
			}
			return printChildren(cmd.Context(), e, c, v.ID, members, removed)
		},
	}
	f.register(cmd.Flags(), e)
	cmd.Flags().StringVar(&asOf, "as-of", "", "the state at a past moment: a duration back (90m, 2h) or an RFC 3339 time")
	return cmd
}

// statusAsOf shows a job as its history had it at t: the events recorded by then,
// folded. A group's line counts its children as the group's own last move before t
// recorded them; its children are not listed, each has its own --as-of.
func statusAsOf(ctx context.Context, e *env, c *client, f *clientFlags, id string, t time.Time) error {
	v, err := c.jobAsOf(ctx, id, t)
	if err != nil {
		return err
	}
	if f.json {
		return json.NewEncoder(e.stdout).Encode(v)
	}
	clk := newClock(f.utc)
	fmt.Fprintf(e.stdout, "as of %s, from the events recorded by then\n", clk.atAgo(t))
	if err := printStatus(e, v, clk); err != nil {
		return err
	}
	if v.Kind == string(events.KindGroup) {
		fmt.Fprintf(e.stdout, "\n(its children as the group last counted them before then; `gridwire status --as-of` each child for its own)\n")
	}
	return nil
}

// liveSummary counts a group's children by the state each has now; a child the read
// side has not shown yet (of the record's n), and one that crashed and is about to run
// again, count as SUBMITTED, as the group's own verdict (events.GroupOf) counts them.
func liveSummary(n int, kids []jobView) *events.GroupSummary {
	g := &events.GroupSummary{Children: max(n, len(kids)), Counts: map[events.Status]int{}}
	for _, k := range kids {
		st := events.Status(k.Status)
		if k.Restarting {
			st = events.StatusSubmitted
		}
		g.Counts[st]++
	}
	if missing := g.Children - len(kids); missing > 0 {
		g.Counts[events.StatusSubmitted] += missing
	}
	return g
}

func printStatus(e *env, v jobView, clk clock) error {
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "job\t%s\n", v.ID)
	if v.Name != "" {
		fmt.Fprintf(tw, "name\t%s\n", v.Name)
	}
	fmt.Fprintf(tw, "state\t%s\n", v.Status)
	if v.ExitCode != nil {
		fmt.Fprintf(tw, "exit code\t%d\n", *v.ExitCode)
	}
	ran := ""
	if !v.StartedAt.IsZero() && !v.EndedAt.IsZero() {
		ran = span(v.EndedAt.Sub(v.StartedAt))
	}
	group := ""
	if v.Group != nil {
		group = v.Group.String()
	}
	attempt := ""
	if v.Attempt > 1 {
		attempt = strconv.Itoa(v.Attempt)
	}
	if v.Restarting {
		attempt += " (crashed; the next attempt is about to begin)"
	}
	path := v.Path
	if path == v.Name {
		path = "" // a DDS task is named by its path: said once
	}
	for _, kv := range [][2]string{{"attempt", strings.TrimSpace(attempt)}, {"reason", v.Reason}, {"group", group}, {"path", path}, {"cluster", v.Cluster}, {"native id", v.NativeID},
		{"native state", v.NativeState}, {"parent", v.Parent}, {"submitter", v.Submitter},
		{"submitted", clk.atAgo(v.SubmittedAt)}, {"started", clk.atAgo(v.StartedAt)}, {"ended", clk.atAgo(v.EndedAt)},
		{"ran for", ran}} {
		if kv[1] != "" {
			fmt.Fprintf(tw, "%s\t%s\n", kv[0], kv[1])
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if v.Status == string(events.StatusFailed) && v.Kind != string(events.KindGroup) && !v.StartedAt.IsZero() {
		fmt.Fprintf(e.stdout, "\n`gridwire logs --stderr %s` shows what it printed on standard error\n", v.ID)
	}
	return nil
}

// isGroup reports whether a history is a parent record's (its submitted job is a group).
func isGroup(evs []events.Event) bool {
	if len(evs) == 0 || evs[0].Name != events.Submitted {
		return false
	}
	var j events.Job
	return evs[0].Payload(&j) == nil && j.Kind == events.KindGroup
}

// printChildren prints a parent record's children (read by childrenOf, split by
// splitRemoved) as a tree below it, one row a child in document order (a child that is
// a group itself has its own children indented); those a topology update removed from
// the session come after, under a heading of their own.
func printChildren(ctx context.Context, e *env, c *client, parent string, members, removed []jobView) error {
	fmt.Fprintf(e.stdout, "\nchildren of %s\n", parent)
	if err := printKids(ctx, e, c, members, "", 0); err != nil {
		return err
	}
	if len(removed) == 0 {
		return nil
	}
	fmt.Fprintf(e.stdout, "\nremoved from %s by a topology update\n", parent)
	return printKids(ctx, e, c, removed, "", 0)
}

// removedFromSession is every child a session's topology updates took out of it, from
// the session's own history.
func removedFromSession(evs []events.Event) map[string]bool {
	gone := map[string]bool{}
	for _, ev := range evs {
		var d events.SessionUpdateData
		if ev.Name == events.SessionUpdated && ev.Payload(&d) == nil {
			for _, id := range d.Removed {
				gone[id] = true
			}
		}
	}
	return gone
}

func splitRemoved(kids []jobView, gone map[string]bool) (members, removed []jobView) {
	if len(gone) == 0 {
		return kids, nil
	}
	for _, k := range kids {
		if gone[k.ID] {
			removed = append(removed, k)
		} else {
			members = append(members, k)
		}
	}
	return members, removed
}

func printTree(ctx context.Context, e *env, c *client, parent, indent string, depth int) error {
	kids, err := childrenOf(ctx, c, parent)
	if err != nil {
		return err
	}
	return printKids(ctx, e, c, kids, indent, depth)
}

// childrenOf reads every child of a parent record, page by page, in document order.
func childrenOf(ctx context.Context, c *client, parent string) ([]jobView, error) {
	q := url.Values{"parent": {parent}}
	var kids []jobView
	for {
		page, err := c.jobs(ctx, q)
		if err != nil {
			return nil, err
		}
		kids = append(kids, page.Jobs...)
		if page.Next == "" {
			return kids, nil
		}
		q.Set("after", page.Next)
	}
}

// printKids prints children as rows of a tree at indent, then each child that is a group
// itself with its own children below it.
func printKids(ctx context.Context, e *env, c *client, kids []jobView, indent string, depth int) error {
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	for _, k := range kids {
		exit := ""
		if k.ExitCode != nil {
			exit = fmt.Sprintf("exit %d", *k.ExitCode)
		}
		fmt.Fprintf(tw, "%s%s\t%s\t%s\t%s\t%s\t%s\n", indent+"└ ", k.ID, cutName(k.label(), 40), k.Status, exit, cut(k.Cluster, 12), cut(k.Reason, 60))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, k := range kids {
		if k.Kind == string(events.KindGroup) && depth < 4 {
			fmt.Fprintf(e.stdout, "%s  %s:\n", indent, k.ID)
			if err := printTree(ctx, e, c, k.ID, indent+"  ", depth+1); err != nil {
				return err
			}
		}
	}
	return nil
}

func historyCmd(e *env) *cobra.Command {
	f := &clientFlags{}
	cmd := &cobra.Command{
		Use:               "history ID",
		Short:             "show every event of a job in order: time, type, source and what it says",
		Example:           "  gridwire history --utc 01JD3Z...",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeJobs(e, f),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.client(e)
			if err != nil {
				return err
			}
			evs, err := c.history(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if f.json {
				return json.NewEncoder(e.stdout).Encode(evs)
			}
			clk := newClock(f.utc)
			tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
			if attempt := attemptOf(evs); attempt != nil {
				// A restarted job: each event is marked with the attempt it belongs to.
				fmt.Fprintln(tw, "SEQ\tTIME\tATTEMPT\tEVENT\tSOURCE\tDETAIL")
				for i, ev := range evs {
					fmt.Fprintf(tw, "%d\t%s\t%d\t%s\t%s\t%s\n", ev.Seq, clk.stamp(ev.Time), attempt[i], ev.Name.Type(), ev.Source, detail(ev))
				}
			} else {
				fmt.Fprintln(tw, "SEQ\tTIME\tEVENT\tSOURCE\tDETAIL")
				for _, ev := range evs {
					fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\n", ev.Seq, clk.stamp(ev.Time), ev.Name.Type(), ev.Source, detail(ev))
				}
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			if !isGroup(evs) {
				return nil
			}
			kids, err := childrenOf(cmd.Context(), c, args[0])
			if err != nil {
				return err
			}
			members, removed := splitRemoved(kids, removedFromSession(evs))
			return printChildren(cmd.Context(), e, c, args[0], members, removed)
		},
	}
	f.register(cmd.Flags(), e)
	return cmd
}

// detail is an event's note for history's last column, on one line, after who caused
// it when a principal did (a submission, a request).
func detail(ev events.Event) string {
	note := strings.TrimPrefix(eventNote(ev), ": ")
	switch {
	case ev.Principal == "":
		return note
	case note == "":
		return "by " + ev.Principal
	}
	return "by " + ev.Principal + ": " + note
}

// attemptOf numbers each event of a history with the attempt it belongs to (a restarted
// event begins the next), or nil for a job that ran once.
func attemptOf(evs []events.Event) []int {
	var out []int
	n := 1
	for i, ev := range evs {
		if ev.Name == events.Restarted {
			if out == nil {
				out = make([]int, len(evs))
				for k := range i {
					out[k] = 1
				}
			}
			n++
		}
		if out != nil {
			out[i] = n
		}
	}
	return out
}

func watchCmd(e *env) *cobra.Command {
	f := &clientFlags{}
	var after string
	cmd := &cobra.Command{
		Use:   "watch [ID]",
		Short: "follow events live (of one job, from its start, until it ends; else of all jobs, from now)",
		Example: `  gridwire watch 01JD3Z...       # one job, until it ends
  gridwire watch --json | jq .type`,
		Args:              cobra.MaximumNArgs(1),
		ValidArgsFunction: completeJobs(e, f),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.client(e)
			if err != nil {
				return err
			}
			q := url.Values{}
			if len(args) == 1 {
				// An unknown job would never send an event: say so rather than wait.
				if _, err := c.job(cmd.Context(), args[0]); err != nil {
					return err
				}
				q.Set("job", args[0])
			}
			if after != "" {
				q.Set("after", after)
			}
			clk := newClock(f.utc)
			enc := json.NewEncoder(e.stdout)
			err = c.stream(cmd.Context(), q, func(ev events.Event) bool {
				if f.json {
					_ = enc.Encode(ev)
				} else {
					fmt.Fprintf(e.stdout, "%d %s %s %s %s%s\n", ev.Seq, clk.stamp(ev.Time), ev.JobID, ev.Name, ev.Source, eventNote(ev))
				}
				return len(args) == 0 || !endsForGood(cmd.Context(), c, ev)
			})
			if errors.Is(err, context.Canceled) {
				return nil // interrupted by the user
			}
			return err
		},
	}
	f.register(cmd.Flags(), e)
	cmd.Flags().StringVar(&after, "after", "", "resume after this stream sequence")
	return cmd
}
