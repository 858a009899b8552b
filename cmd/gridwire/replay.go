package main

import (
	"encoding/json"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/services/watcher"
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
			"(default " + watcher.JobsBucket + "-replay) and compares it with the live projection: every job\n" +
			"must have the same row, except jobs that moved on after the replay read the log.\n" +
			"--bucket " + watcher.JobsBucket + " --live '' rebuilds the live projection itself (stop the watchers first).",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
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
			table, res, err := watcher.Rebuild(cmd.Context(), sys.bus.JS, watcher.RebuildOptions{
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
			var diffs []watcher.Difference
			if live != "" && live != bucket {
				if diffs, err = watcher.Compare(cmd.Context(), sys.bus.JS, live, table, res.Seq); err != nil {
					return err
				}
			}
			if asJSON {
				return json.NewEncoder(e.stdout).Encode(struct {
					watcher.RebuildResult
					Rate        float64              `json:"events_per_second"`
					Differences []watcher.Difference `json:"differences"`
				}{res, res.Rate(), diffs})
			}
			fmt.Fprintf(e.stdout, "replayed %d events (%d refused) of %d jobs up to seq %d into %s in %s: %.0f events/s\n",
				res.Events, res.Refused, res.Jobs, res.Seq, bucket, res.Duration.Round(time.Millisecond), res.Rate())
			if live == "" || live == bucket {
				return nil
			}
			for _, d := range diffs {
				fmt.Fprintf(e.stdout, "differs: job %s: live %s, rebuilt %s\n", d.Job, rowSummary(d.Live), rowSummary(d.Rebuilt))
			}
			if len(diffs) > 0 {
				fmt.Fprintf(e.stdout, "%d jobs differ from the live projection %s\n", len(diffs), live)
				return exitCode(1)
			}
			fmt.Fprintf(e.stdout, "identical to the live projection %s\n", live)
			return nil
		},
	}
	f.register(cmd.Flags(), e)
	cmd.Flags().StringVar(&bucket, "bucket", watcher.JobsBucket+"-replay", "KV bucket to rebuild into (emptied first)")
	cmd.Flags().StringVar(&live, "live", watcher.JobsBucket, "live projection to compare with ('' compares nothing)")
	cmd.Flags().IntVar(&shards, "shards", 0, "jobs folded in parallel (default: one per CPU)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the result as JSON")
	return cmd
}

func rowSummary(r *watcher.Row) string {
	if r == nil {
		return "missing"
	}
	return fmt.Sprintf("%s after %d events (seq %d)", r.Status, r.Events, r.LastSeq)
}
