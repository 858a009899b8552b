package stager

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"slices"
	"strings"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/pkg/cluster"
	"github.com/gridwire/gridwire/pkg/shellquote"
	"github.com/gridwire/gridwire/pkg/substitute"
	"github.com/gridwire/gridwire/pkg/target"
)

// Run-time names (events.RuntimeValues: JRDL's HOME, LOGNAME, JOBID, ...) in a job's
// staging names, stdout and stderr destinations, directory and cleanup list stand for
// values only its target knows. Before it plans a pass the stager asks the target for
// them with the same shell expressions the JOB script uses, so what it moves is what
// the job names when it runs: on a fork cluster by running them on this machine (as
// the cluster's run_as user would see them: that user's HOME and LOGNAME), on an SSH or
// batch cluster over SSH on the host it stages to. Whether a filled name is then a file
// in the job's directory, a gateway file or refused follows the staging rules.

// targetJob is the job as its target sees it: jobOf, with the run-time names it uses
// filled with the target's values.
func (s *stager) targetJob(ctx context.Context, st events.State) (events.Job, error) {
	job := jobOf(st)
	names := runtimeNames(job)
	if len(names) == 0 {
		return job, nil
	}
	vals, err := s.runtimeValues(ctx, st, names)
	if err != nil {
		return job, fmt.Errorf("job %s: reading %s on its target: %w", st.JobID, strings.Join(names, ", "), err)
	}
	if slices.Contains(job.Substitutions, events.RuntimeContact) {
		vals[events.RuntimeContact] = s.contact(job, st.Cluster)
	}
	return job.Substitute(vals), nil
}

// runtimeNames are the run-time names a target evaluates that the job uses where the
// stager reads: its directory, default storage base, stdio, staging lists and cleanup
// (a name used only in the program's words is the JOB script's alone), sorted.
func runtimeNames(job events.Job) []string {
	fields := []string{job.Directory, job.DefaultStorageBase, job.Stdin}
	fields = append(append(append(fields, job.Stdout...), job.Stderr...), job.Cleanup...)
	for _, f := range append(slices.Clone(job.StageIn), job.StageOut...) {
		fields = append(fields, f.From, f.To)
	}
	used := map[string]bool{}
	for _, f := range fields {
		for _, n := range substitute.Names(f) {
			used[n] = true
		}
	}
	var names []string
	for _, n := range job.Substitutions {
		if _, ok := events.RuntimeValues[n]; ok && used[n] {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// contact is the resource manager contact, as the JOB script has it: the one the job
// named, else its cluster's first host, else the cluster's name.
func (s *stager) contact(job events.Job, name string) string {
	if co := job.Coallocation; co != nil && co.Contact != "" {
		return co.Contact
	}
	if cl, ok := s.cfg.Clusters.Find(name); ok && len(cl.Hosts) > 0 {
		return cl.Hosts[0]
	}
	return name
}

// runtimeScript prints each name's value, NUL-terminated, with the job's ID and working
// directory set as the JOB script has them.
func runtimeScript(st events.State, names []string) string {
	var b strings.Builder
	b.WriteString(events.VarJobID + "=" + shellquote.Quote(st.JobID) + "\n")
	b.WriteString(events.VarWorkDir + "=" + shellquote.Quote(st.Incarnation.WorkDir) + "\n")
	b.WriteString("printf '%s\\0'")
	for _, n := range names {
		b.WriteString(` "` + events.RuntimeValues[n] + `"`)
	}
	b.WriteString("\n")
	return b.String()
}

// runtimeValues runs runtimeScript on the job's target and reads the values back.
func (s *stager) runtimeValues(ctx context.Context, st events.State, names []string) (map[string]string, error) {
	script := runtimeScript(st, names)
	var out []byte
	var err error
	cl, ok := s.cfg.Clusters.Find(st.Cluster)
	if !ok || cl.Kind == cluster.KindFork {
		out, err = runLocal(ctx, script, cl.RunAs)
	} else {
		host := st.Host
		if host == "" && st.Incarnation != nil {
			host = st.Incarnation.Host
		}
		out, err = s.runRemote(ctx, cl, host, script)
	}
	if err != nil {
		return nil, err
	}
	vals := strings.Split(string(out), "\x00")
	if len(vals) != len(names)+1 || vals[len(names)] != "" {
		return nil, fmt.Errorf("the target printed %d values for %d names", len(vals)-1, len(names))
	}
	m := make(map[string]string, len(names))
	for i, n := range names {
		m[n] = vals[i]
	}
	return m, nil
}

// runLocal runs script with /bin/sh on this machine; with runAs, HOME and LOGNAME are
// that user's, as the job's would be.
func runLocal(ctx context.Context, script, runAs string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", script)
	cmd.Env = os.Environ()
	if runAs != "" {
		u, err := user.Lookup(runAs)
		if err != nil {
			if u, err = user.LookupId(runAs); err != nil {
				return nil, fmt.Errorf("run_as %q: %w", runAs, err)
			}
		}
		cmd.Env = append(cmd.Env, "HOME="+u.HomeDir, "LOGNAME="+u.Username)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%w: %s", err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

// runRemote runs script over SSH as the cluster's login, on the host the stager
// stages to (the one the job ran on, else the first).
func (s *stager) runRemote(ctx context.Context, cl cluster.Cluster, host, script string) ([]byte, error) {
	if !slices.Contains(cl.Hosts, host) {
		host = cl.Hosts[0]
	}
	pool, err := s.ssh.pool(poolKey{target.ClusterLogin(cl), false})
	if err != nil {
		return nil, err
	}
	c, err := pool.Client(ctx, host)
	if err != nil {
		return nil, err
	}
	res, err := c.Run(ctx, script, nil)
	if err != nil {
		return nil, err
	}
	if res.ExitCode != 0 {
		return nil, fmt.Errorf("on %s: exit %d: %s", host, res.ExitCode, strings.TrimSpace(string(res.Stderr)))
	}
	return res.Stdout, nil
}
