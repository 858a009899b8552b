package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"text/tabwriter"
	"time"

	"github.com/gridwire/gridwire/events"
	"github.com/spf13/cobra"
)

func statusCmd(e *env) *cobra.Command {
	f := &clientFlags{}
	cmd := &cobra.Command{
		Use:   "status ID",
		Short: "show a job's state, exit code, cluster and times",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			v, err := f.client().job(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if f.json {
				return json.NewEncoder(e.stdout).Encode(v)
			}
			tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintf(tw, "job\t%s\nstate\t%s\n", v.ID, v.Status)
			if v.ExitCode != nil {
				fmt.Fprintf(tw, "exit code\t%d\n", *v.ExitCode)
			}
			for _, kv := range [][2]string{{"reason", v.Reason}, {"cluster", v.Cluster}, {"native id", v.NativeID},
				{"native state", v.NativeState}, {"submitter", v.Submitter}, {"submitted", stamp(v.SubmittedAt)},
				{"started", stamp(v.StartedAt)}, {"ended", stamp(v.EndedAt)}} {
				if kv[1] != "" {
					fmt.Fprintf(tw, "%s\t%s\n", kv[0], kv[1])
				}
			}
			return tw.Flush()
		},
	}
	f.register(cmd.Flags(), e)
	return cmd
}

func historyCmd(e *env) *cobra.Command {
	f := &clientFlags{}
	cmd := &cobra.Command{
		Use:   "history ID",
		Short: "show every event of a job in order, with type, time and source",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			evs, err := f.client().history(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if f.json {
				return json.NewEncoder(e.stdout).Encode(evs)
			}
			tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "SEQ\tTIME\tTYPE\tSOURCE")
			for _, ev := range evs {
				fmt.Fprintf(tw, "%d\t%s\t%s\t%s\n", ev.Seq, stamp(ev.Time), ev.Name.Type(), ev.Source)
			}
			return tw.Flush()
		},
	}
	f.register(cmd.Flags(), e)
	return cmd
}

func watchCmd(e *env) *cobra.Command {
	f := &clientFlags{}
	var after string
	cmd := &cobra.Command{
		Use:   "watch [ID]",
		Short: "follow events live (of one job, from its start; else of all jobs, from now)",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			q := url.Values{}
			if len(args) == 1 {
				q.Set("job", args[0])
			}
			if after != "" {
				q.Set("after", after)
			}
			enc := json.NewEncoder(e.stdout)
			err := f.client().stream(cmd.Context(), q, func(ev events.Event) bool {
				if f.json {
					_ = enc.Encode(ev)
				} else {
					fmt.Fprintf(e.stdout, "%d %s %s %s %s\n", ev.Seq, stamp(ev.Time), ev.JobID, ev.Name, ev.Source)
				}
				return len(args) == 0 || !ev.Name.Terminal()
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

func stamp(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}
