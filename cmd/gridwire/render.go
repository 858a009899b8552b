package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/pkg/cluster"
	"github.com/gridwire/gridwire/services/incarnator"
	"github.com/gridwire/gridwire/services/ingest"
	"github.com/spf13/cobra"
)

func renderCmd(e *env) *cobra.Command {
	var config, profiles, data, format string
	var scripts []string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "render [--config FILE] JOBFILE...",
		Short: "print the cluster chosen for each job of each file (- is standard input) and its rendered START script",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, files []string) error {
			if err := oneStdin(files); err != nil {
				return err
			}
			cfg, err := cluster.Load(config)
			if err != nil {
				return err
			}
			set, err := incarnator.LoadProfiles(firstOf(profiles, cfg.ProfileDir))
			if err != nil {
				return err
			}
			root, err := filepath.Abs(filepath.Join(firstOf(data, e.getenv("GRIDWIRE_DATA"), cfg.DataDir, ".gridwire-data"), "jobs"))
			if err != nil {
				return err
			}
			planner, err := incarnator.NewPlanner(cfg, set, root)
			if err != nil {
				return cfg.Locate(err)
			}
			r := renderer{e: e, planner: planner, scripts: scripts, json: asJSON, format: format}
			var bad []error
			for _, file := range files {
				bad = append(bad, r.file(file))
			}
			if err := errors.Join(bad...); err != nil {
				fmt.Fprintln(e.stderr, err)
				return exitCode(exitInvalid)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&config, "config", e.getenv("GRIDWIRE_CONFIG"), "YAML config naming the clusters; default: one local fork cluster")
	cmd.Flags().StringVar(&profiles, "profiles", "", "profile directory; default the config's profile_dir, else the built-in profiles")
	cmd.Flags().StringVar(&data, "data", "", "data directory whose jobs/ holds fork clusters' job directories")
	cmd.Flags().StringVar(&format, "format", "", formatHelp())
	cmd.Flags().StringSliceVar(&scripts, "script", []string{events.ScriptStart}, "scripts to print (JOB, START, ABORT, GET_JOB_STATUS, ...)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print each job's whole incarnation as JSON")
	return cmd
}

type renderer struct {
	e       *env
	planner *incarnator.ProfilePlanner
	scripts []string
	json    bool
	format  string
}

// file renders every runnable job of one description file.
func (r renderer) file(file string) error {
	data, err := r.e.readInput(file)
	if err != nil {
		return err
	}
	jobs, err := ingest.Parse(shown(file), data, ingest.ParseOptions{Format: r.format, ContentType: contentTypeOf(file)})
	if err != nil {
		return err
	}
	var bad []error
	for _, job := range jobs {
		if job.Kind == events.KindGroup {
			continue
		}
		if job.ID == "" {
			job.ID = events.NewID() // what ingest would give it
		}
		inc, err := r.planner.Plan(job)
		if err != nil {
			fmt.Fprintf(r.e.stdout, "# %s job %s: not incarnated: %v\n", file, job.ID, err)
			bad = append(bad, fmt.Errorf("%s: job %s: %w", file, job.ID, err))
			continue
		}
		if r.json {
			enc := json.NewEncoder(r.e.stdout)
			enc.SetIndent("", "  ")
			if err := enc.Encode(inc); err != nil {
				return err
			}
			continue
		}
		fmt.Fprintf(r.e.stdout, "# %s job %s: cluster %s, queue %q, lrms %s, profile %s (%s)\n# work dir %s\n",
			file, job.ID, inc.Cluster, inc.Queue, inc.LRMS, inc.Profile, inc.ProfileHash, inc.WorkDir)
		for _, name := range r.scripts {
			s, ok := inc.Scripts[name]
			if !ok {
				fmt.Fprintf(r.e.stdout, "# %s: the profile has no such script\n", name)
				continue
			}
			fmt.Fprintf(r.e.stdout, "# --- %s (sha256 %s)\n%s\n", name, s.SHA256, s.Body)
		}
	}
	return errors.Join(bad...)
}
