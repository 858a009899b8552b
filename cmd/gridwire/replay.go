package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/services/readside"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
)

func replayCmd(e *env) *cobra.Command {
	f := &busFlags{}
	var bucket, live string
	var shards int
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "replay",
		Short: "rebuild the job table projection from the log, and prove it equal to the live one",
		Long: "replay folds every event of the log, from the first, into a fresh projection bucket\n" +
			"(default " + readside.JobsBucket + "-replay) and compares it with the live projection: every job\n" +
			"must have the same row, except jobs that moved on after the replay read the log.\n" +
			"--bucket " + readside.JobsBucket + " --live '' rebuilds the live projection itself (stop the watchers first).",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := requireLog(f); err != nil {
				return err
			}
			sys, err := openSystem(cmd.Context(), e, f, true)
			if err != nil {
				return err
			}
			defer sys.close()
			// A replay allocates briefly per event and keeps one row per job: collecting
			// less often is a third faster (BENCHMARKS.md) for a bounded heap.
			defer debug.SetGCPercent(debug.SetGCPercent(400))
			bar := progressbar.NewOptions64(-1, progressbar.OptionSetWriter(e.stderr), progressbar.OptionSetDescription("replaying"),
				progressbar.OptionShowCount(), progressbar.OptionShowIts(), progressbar.OptionSetItsString("events"),
				progressbar.OptionThrottle(100*time.Millisecond), progressbar.OptionClearOnFinish())
			table, res, err := readside.Rebuild(cmd.Context(), sys.bus.JS, readside.RebuildOptions{
				Bucket: bucket, Shards: shards,
				Progress: func(done, total uint64) {
					bar.ChangeMax64(int64(total))
					_ = bar.Set64(int64(done))
				},
				Refused: func(ev events.Event, err error) {
					sys.log.Warn("event refused by the fold", "seq", ev.Seq, "job", ev.JobID, "event", ev.Name, "err", err)
				},
			})
			_ = bar.Finish()
			if err != nil {
				return err
			}
			var cmp *readside.Comparison
			if live != "" && live != bucket {
				c, err := readside.Compare(cmd.Context(), sys.bus.JS, live, table, res.Seq)
				switch {
				case errors.Is(err, jetstream.ErrBucketNotFound):
					fmt.Fprintf(e.stderr, "gridwire: no live projection %s to compare with (no watcher has run)\n", live)
				case err != nil:
					return err
				default:
					cmp = &c
				}
			}
			if asJSON {
				return json.NewEncoder(e.stdout).Encode(struct {
					readside.RebuildResult
					Rate       float64              `json:"events_per_second"`
					Comparison *readside.Comparison `json:"comparison,omitempty"`
				}{res, res.Rate(), cmp})
			}
			fmt.Fprintf(e.stdout, "replayed %d events (%d refused) of %d jobs up to seq %d into %s in %s: %.0f events/s\n",
				res.Events, res.Refused, res.Jobs, res.Seq, bucket, res.Duration.Round(time.Millisecond), res.Rate())
			return reportComparison(e, live, cmp)
		},
	}
	f.register(cmd.Flags(), e)
	cmd.Flags().StringVar(&bucket, "bucket", readside.JobsBucket+"-replay", "KV bucket to rebuild into (emptied first)")
	cmd.Flags().StringVar(&live, "live", readside.JobsBucket, "live projection to compare with ('' compares nothing)")
	cmd.Flags().IntVar(&shards, "shards", 0, "jobs folded in parallel (default: one per CPU)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the result as JSON")
	return cmd
}

func rowSummary(r *readside.Row) string {
	if r == nil {
		return "missing"
	}
	return fmt.Sprintf("%s after %d events (seq %d)", r.Status, r.Events, r.LastSeq)
}

// reportComparison prints how the live projection compares; differences exit 1.
func reportComparison(e *env, live string, c *readside.Comparison) error {
	if c == nil {
		return nil
	}
	for _, d := range c.Differences {
		fmt.Fprintf(e.stdout, "differs: job %s: live %s, rebuilt %s\n", d.Job, rowSummary(d.Live), rowSummary(d.Rebuilt))
	}
	if len(c.Differences) > 0 {
		fmt.Fprintf(e.stdout, "%d jobs differ from the live projection %s\n", len(c.Differences), live)
		return exitCode(1)
	}
	if c.Behind > 0 {
		fmt.Fprintf(e.stdout, "identical to the live projection %s up to its stamp %d; %d jobs have events it has not folded yet\n",
			live, c.LiveSeq, c.Behind)
		return nil
	}
	fmt.Fprintf(e.stdout, "identical to the live projection %s\n", live)
	return nil
}
