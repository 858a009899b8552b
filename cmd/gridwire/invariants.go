package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/services/property"
	"github.com/gridwire/gridwire/services/readside"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"
)

func auditInvariantsCmd(e *env) *cobra.Command {
	f := &busFlags{}
	var expect, live string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "invariants",
		Short: "check the whole log: nothing lost, doubled, stuck, illegal, ended twice or run twice",
		Long: "invariants reads every event of the log and checks, for every job: its history is a legal\n" +
			"path through the state machine; it has exactly one terminal event and nothing after it but\n" +
			"a restart or the one directory_deleted of its retention; it\n" +
			"was started at most once; it has ended. With --expect FILE (one acknowledged job ID per line)\n" +
			"every listed job must be in the log and no other job may be. The job table projection is\n" +
			"rebuilt from the log in memory and compared with the live one, and so is the live view of\n" +
			"DDS session properties when a read side has made it (--live '' skips both).\n" +
			"It prints the counts and exits 1 when any is not zero.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			expected, err := readIDs(expect)
			if err != nil {
				return err
			}
			if err := requireLog(f); err != nil {
				return err
			}
			sys, err := openSystem(cmd.Context(), e, f, true)
			if err != nil {
				return err
			}
			defer sys.close()
			c, err := sys.connect("audit")
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			var hist map[string][]events.Event
			if err := retryTransient(ctx, e, "reading the log", auditPatience, func() (err error) {
				hist, err = readAll(ctx, c.store)
				return err
			}); err != nil {
				return err
			}
			rep := invariantsReport{Invariants: events.CheckInvariants(hist, expected)}
			if live != "" {
				for _, step := range []struct {
					what    string
					compare func(*invariantsReport) error
				}{
					{"comparing the projection", func(r *invariantsReport) error { return r.compareProjection(ctx, sys, live) }},
					{"comparing the property view", func(r *invariantsReport) error { return r.compareProperties(ctx, sys) }},
				} {
					// A comparison tried again starts from the report as it was before it.
					if err := retryTransient(ctx, e, step.what, auditPatience, func() error {
						r := rep
						if err := step.compare(&r); err != nil {
							return err
						}
						rep = r
						return nil
					}); err != nil {
						return err
					}
				}
			}
			return rep.print(e, asJSON)
		},
	}
	f.register(cmd.Flags(), e)
	cmd.Flags().StringVar(&expect, "expect", "", "file of acknowledged job IDs, one per line")
	cmd.Flags().StringVar(&live, "live", readside.JobsBucket, "live projection to compare with a rebuild ('' skips it)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON")
	return cmd
}

// auditPatience is how long the audit keeps asking a server that does not answer (a
// cluster electing a leader after a node restarted, say) before it gives up.
const auditPatience = time.Minute

// retryTransient runs f, and runs it again while it fails because a server did not
// answer (events.RetryTransient), saying so on stderr each time, for at most patience.
func retryTransient(ctx context.Context, e *env, what string, patience time.Duration, f func() error) error {
	_, err := events.RetryTransient(ctx, patience, func(wait time.Duration, err error) {
		fmt.Fprintf(e.stderr, "audit: %s: %v; trying again in %s\n", what, err, wait)
	}, f)
	return err
}

type invariantsReport struct {
	events.Invariants
	ProjectionDiffs int `json:"projection_diffs"` // rows of the live projection unlike the rebuilt ones
	PropertyDiffs   int `json:"property_diffs"`   // entries of the live property view unlike the rebuilt ones
}

// compareProperties rebuilds the live view of properties in memory and compares it with
// the live one, when there is one.
func (r *invariantsReport) compareProperties(ctx context.Context, sys *system) error {
	view, upTo, err := property.Rebuild(ctx, sys.bus.JS, "")
	if err != nil {
		return fmt.Errorf("rebuilding the property view: %w", err)
	}
	cmp, err := property.Compare(ctx, sys.bus.JS, property.Bucket, view, upTo)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	r.PropertyDiffs = len(cmp.Differences)
	for _, d := range cmp.Differences {
		r.Problems = append(r.Problems, fmt.Sprintf("property %s: live view %s, rebuilt %s", d.Key, entrySummary(d.Live), entrySummary(d.Rebuilt)))
	}
	return nil
}

func (r *invariantsReport) compareProjection(ctx context.Context, sys *system, live string) error {
	table, res, err := readside.Rebuild(ctx, sys.bus.JS, readside.RebuildOptions{})
	if err != nil {
		return fmt.Errorf("rebuilding the projection: %w", err)
	}
	cmp, err := readside.Compare(ctx, sys.bus.JS, live, table, res.Seq)
	if err != nil {
		return err
	}
	r.ProjectionDiffs = len(cmp.Differences)
	for _, d := range cmp.Differences {
		r.Problems = append(r.Problems, fmt.Sprintf("job %s: live projection %s, rebuilt %s", d.Job, rowSummary(d.Live), rowSummary(d.Rebuilt)))
	}
	return nil
}

func (r invariantsReport) print(e *env, asJSON bool) error {
	if asJSON {
		if err := json.NewEncoder(e.stdout).Encode(r); err != nil {
			return err
		}
	} else {
		for _, p := range r.Problems {
			fmt.Fprintln(e.stdout, "VIOLATION", p)
		}
		fmt.Fprintf(e.stdout, "jobs %d events %d: lost %d duplicated %d stuck %d illegal %d terminals %d after %d run_twice %d properties %d projection_diffs %d property_diffs %d\n",
			r.Jobs, r.Events, r.Lost, r.Duplicated, r.Stuck, r.Illegal, r.Terminals, r.After, r.RunTwice, r.Properties, r.ProjectionDiffs, r.PropertyDiffs)
	}
	if !r.OK() || r.ProjectionDiffs > 0 || r.PropertyDiffs > 0 {
		return exitCode(1)
	}
	return nil
}

// readAll groups every event of the log by job, in stream order.
func readAll(ctx context.Context, st *events.Store) (map[string][]events.Event, error) {
	out := map[string][]events.Event{}
	for from := uint64(1); ; {
		batch, more, err := st.ReadRange(ctx, from, 1024)
		if err != nil {
			return nil, fmt.Errorf("reading the log from %d: %w", from, err)
		}
		for _, ev := range batch {
			out[ev.JobID] = append(out[ev.JobID], ev)
		}
		if len(batch) == 0 || !more {
			return out, nil
		}
		from = batch[len(batch)-1].Seq + 1
	}
}

// readIDs reads one job ID a line; "" is no file (nil: no expectation).
func readIDs(path string) ([]string, error) {
	if path == "" {
		return nil, nil
	}
	fh, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("--expect: %w", err)
	}
	defer fh.Close()
	ids := []string{}
	sc := bufio.NewScanner(fh)
	for line := 1; sc.Scan(); line++ {
		id := strings.TrimSpace(sc.Text())
		if id == "" {
			continue
		}
		if !events.ValidJobID(id) {
			return nil, fmt.Errorf("--expect %s:%d: %q is not a job ID", path, line, id)
		}
		ids = append(ids, id)
	}
	return ids, sc.Err()
}
