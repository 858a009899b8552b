package incarnator

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/gridwire/gridwire/pkg/shellquote"
	"os"
	"regexp"
	"strings"
	"sync"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/pkg/cluster"
	"github.com/gridwire/gridwire/services/incarnator/profile"
)

// mpiApplication is the ApplicationName of the profile entry that starts MPI jobs which
// name no application of their own.
const mpiApplication = "MPI"

// ProfilePlanner chooses a cluster for each job from its requirements and renders the
// job's scripts through that cluster's OS profile. It is immutable after NewPlanner and
// safe for concurrent use.
type ProfilePlanner struct {
	targets []*target
	set     *profile.Set
}

// target is one cluster with its resolved profile and what can be rendered once.
type target struct {
	cl         cluster.Cluster
	prof       *profile.Profile
	root       string // where job working directories go
	delim      string
	localNames []string
	forkOnly   bool // every cluster of the config is Fork: the v3 fork rule has no say
	// users are the config's user profiles; userField names every field some user sets.
	users     cluster.Config
	userField map[string]bool
	watch     watch
	// static scripts of the profile by template name, rendered once.
	statics map[string]staticScript
	// scripts that depend on no job value, rendered once (by script name).
	fixed map[string]events.Script
	// storages, when no storage path depends on the job, rendered once.
	storages *storagePaths
}

type staticScript struct {
	fileName string
	script   events.Script // Body = content, Location = path in BIN storage
}

// controlScripts are the profile templates rendered for every job besides JOB, by the
// script name the executor and watcher use.
var controlScripts = []struct {
	name, template, variation string
	optional                  bool // rendered only by profiles that define it
}{
	{events.ScriptStart, "START", "", false},
	{events.ScriptStartComponent, "START_HETJOB_COMPONENT", "", true},
	{events.ScriptAbort, "ABORT", "", false},
	{events.ScriptHold, "HOLD", "", false},
	{events.ScriptResume, "RESUME", "", false},
	{events.ScriptStatus, "GET_JOB_STATUS", "", false},
	{events.ScriptDelete, "DELETE", "", false},
	{events.ScriptList + ":FILE", "LIST", "FILE", false},
	{events.ScriptList + ":DIR", "LIST", "DIR", false},
}

// NewPlanner checks that every cluster's profile exists in the set and is complete, and
// renders what does not depend on jobs. workRoot is where fork clusters that name no
// work_root put job directories (the gateway's data directory); clusters reached over
// SSH use their work_root, else their profile's UspaceRoot.
func NewPlanner(cfg cluster.Config, profiles *profile.Set, workRoot string) (*ProfilePlanner, error) {
	if profiles == nil {
		return nil, errors.New("incarnator: no profile set")
	}
	p := &ProfilePlanner{set: profiles}
	local := localNames()
	forkOnly := true
	for _, cl := range cfg.Clusters {
		forkOnly = forkOnly && isFork(cl.LRMS)
	}
	var errs []error
	for i, cl := range cfg.Clusters {
		t, err := newTarget(cl, profiles, workRoot, local, cfg)
		if err != nil { // worded as the config's field, so the CLI can name its line
			errs = append(errs, fmt.Errorf("clusters[%d].profile: cluster %s: %w", i, cl.Name, err))
			continue
		}
		t.forkOnly = forkOnly
		p.targets = append(p.targets, t)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return p, nil
}

func localNames() []string {
	names := []string{"localhost", "127.0.0.1"}
	if h, err := os.Hostname(); err == nil && h != "" {
		names = append(names, h)
	}
	return names
}

func newTarget(cl cluster.Cluster, set *profile.Set, workRoot string, local []string, cfg cluster.Config) (*target, error) {
	prof, ok := set.Profile(cl.Profile)
	if !ok {
		return nil, fmt.Errorf("profile %q is not in the profile set (%s)", cl.Profile, strings.Join(set.Names(), ", "))
	}
	errs := profile.CheckRequired(prof)
	if cl.Kind == cluster.KindFork && (isFork(cl.LRMS) || strings.EqualFold(cl.Profile, "fork")) {
		// The executor's own fork target runs these jobs (a local cluster with a
		// batch LRMS runs the profile's START instead).
		errs = append(errs, forkOverrides(prof)...)
	}
	w, werrs := watchFields(prof)
	if err := errors.Join(append(errs, werrs...)...); err != nil {
		return nil, fmt.Errorf("profile %q cannot run jobs: %w", cl.Profile, err)
	}
	t := &target{cl: cl, prof: prof, watch: w, delim: prof.Delimiter, localNames: local,
		users: cfg, userField: map[string]bool{}}
	for _, u := range cfg.Users {
		for name := range u.Fields {
			t.userField[name] = true
		}
	}
	if t.delim == "" {
		t.delim = "/"
	}
	t.root = rootOf(cl, prof, workRoot)
	if t.root == "" {
		return nil, fmt.Errorf("no work_root, and profile %q has no UspaceRoot", cl.Profile)
	}
	if err := t.prepare(); err != nil {
		return nil, err
	}
	return t, nil
}

// rootOf is where a cluster's job directories are made: its work_root, else (a fork
// cluster) the gateway's, else its profile's UspaceRoot.
func rootOf(cl cluster.Cluster, prof *profile.Profile, workRoot string) string {
	switch {
	case cl.WorkRoot != "":
		return cl.WorkRoot
	case cl.Kind == cluster.KindFork && workRoot != "":
		return workRoot
	}
	return prof.UspaceRoot
}

// WorkRoot is the directory a cluster's job directories are made in, as the planner
// makes them (workRoot as for NewPlanner): the executor's retention removes nothing
// outside it.
func WorkRoot(cl cluster.Cluster, profiles *profile.Set, workRoot string) (string, error) {
	prof, ok := profiles.Profile(cl.Profile)
	if !ok {
		return "", fmt.Errorf("cluster %s: profile %q is not in the profile set", cl.Name, cl.Profile)
	}
	root := rootOf(cl, prof, workRoot)
	if root == "" {
		return "", fmt.Errorf("cluster %s: no work_root, and profile %q has no UspaceRoot", cl.Name, cl.Profile)
	}
	return root, nil
}

// Profiles returns the planner's profile set.
func (p *ProfilePlanner) Profiles() *profile.Set { return p.set }

// Plan plans a job's first attempt.
func (p *ProfilePlanner) Plan(job events.Job) (events.IncarnatedData, error) {
	return p.PlanAttempt(job, 1)
}

// PlanAttempt implements Planner: the first cluster, in config order, that meets every
// requirement runs the attempt. An attempt after the first has a working directory of
// its own (the job's, suffixed .N), so nothing the last one left there (its start lock,
// its output) passes for the new run's.
func (p *ProfilePlanner) PlanAttempt(job events.Job, attempt int) (events.IncarnatedData, error) {
	if err := checkJob(&job); err != nil {
		return events.IncarnatedData{}, err
	}
	excluded := map[string]string{}
	rendering := false
	for _, t := range p.targets {
		why := t.exclusions(&job)
		host, hostWhy := "", ""
		if len(why) == 0 {
			host, hostWhy = t.placeHost(&job)
		}
		if hostWhy != "" {
			why = append(why, hostWhy)
		}
		if len(why) > 0 {
			excluded[t.cl.Name] = reasons(why)
			continue
		}
		inc, err := t.render(&job, attempt, p.set.Hash)
		inc.Host = host
		if err != nil {
			// Another matching cluster's profile may take the job (other limits,
			// another template); every cluster's reason is reported if none does.
			excluded[t.cl.Name] = "matches, but rendering failed: " + err.Error()
			rendering = true
			continue
		}
		return inc, nil
	}
	if len(p.targets) == 0 {
		excluded["(none)"] = "the config has no clusters"
	}
	nm := &NoMatchError{Job: job.ID, Excluded: excluded, Rendering: rendering}
	if rendering {
		return events.IncarnatedData{}, fmt.Errorf("%w: %w", ErrRejected, nm)
	}
	return events.IncarnatedData{}, nm
}

// reasons lists why a cluster was excluded; several are numbered, since each may hold
// commas of its own.
func reasons(why []string) string {
	if len(why) == 1 {
		return why[0]
	}
	var b strings.Builder
	for i, w := range why {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "(%d) %s", i+1, w)
	}
	return b.String()
}

// checkJob refuses jobs no cluster could render: names the shell cannot export, fields
// that would shadow the context's own, executables a shell's exec would misread.
func checkJob(job *events.Job) error {
	switch {
	case !jobIDPattern.MatchString(job.ID):
		return fmt.Errorf("%w: id: %q is not a job ID (1-64 letters, digits, - or _)", ErrRejected, job.ID)
	case job.Executable == "":
		return fmt.Errorf("%w: executable: missing", ErrRejected)
	case strings.HasPrefix(job.Executable, "-"):
		return fmt.Errorf("%w: executable: %q starts with '-', which exec would read as an option (write ./%s)", ErrRejected, job.Executable, job.Executable)
	case strings.ContainsRune(job.Executable, 0):
		return fmt.Errorf("%w: executable: contains a NUL byte", ErrRejected)
	}
	for _, v := range job.Environment {
		if !shellquote.IsName(v.Name) {
			return fmt.Errorf("%w: environment: variable name %q is not a shell name", ErrRejected, v.Name)
		}
		if strings.HasPrefix(v.Name, "GW_") {
			return fmt.Errorf("%w: environment: variable name %q: the GW_ prefix is gridwire's own", ErrRejected, v.Name)
		}
	}
	for name := range job.Fields {
		if isSpecial(name) {
			return fmt.Errorf("%w: fields: %s is a special field the gateway provides; a job cannot set it", ErrRejected, name)
		}
	}
	for _, s := range allJobStrings(job) {
		if strings.IndexByte(s, 0) >= 0 {
			return fmt.Errorf("%w: a job value contains a NUL byte, which no shell word can hold", ErrRejected)
		}
	}
	return nil
}

var jobIDPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

func allJobStrings(job *events.Job) []string {
	out := append([]string{job.Name, job.Directory}, job.Arguments...)
	out = append(out, job.LibraryPath...)
	for _, v := range job.Environment {
		out = append(out, v.Value)
	}
	for _, v := range job.Fields {
		out = append(out, v)
	}
	return out
}

func script(body string) events.Script {
	sum := sha256.Sum256([]byte(body))
	return events.Script{Body: body, SHA256: hex.EncodeToString(sum[:])}
}

// builtinFork is the shipped fork profile, whose START and GET_JOB_STATUS describe what
// a fork cluster's executor and watcher do themselves.
var builtinFork = sync.OnceValues(func() (*profile.Profile, error) {
	set, err := profile.LoadFS(builtinProfiles, "profiles", "builtin:profiles")
	if err != nil {
		return nil, err
	}
	p, ok := set.Profile("fork")
	if !ok {
		return nil, errors.New("the built-in profiles have no fork profile")
	}
	return p, nil
})

// forkOverrides refuses a profile on a local fork cluster whose START or GET_JOB_STATUS
// is not the shipped fork profile's: a fork cluster's executor starts the JOB script as
// a process of its own and its watcher looks at that process, so such a template would
// never run, and the profile would silently not do what it says.
func forkOverrides(p *profile.Profile) []error {
	fork, err := builtinFork()
	if err != nil {
		return []error{err}
	}
	var errs []error
	for _, name := range []string{"START", "GET_JOB_STATUS"} {
		mine, theirs := p.Template(name), fork.Template(name)
		if mine == nil || theirs == nil || sameInvocation(mine.Invocation(""), theirs.Invocation("")) {
			continue
		}
		errs = append(errs, fmt.Errorf("%s: template %s differs from the fork profile's, and a fork cluster never runs it "+
			"(its executor starts the JOB script itself and its watcher watches that process): "+
			"use this profile on an ssh or batch cluster, or keep the fork profile's %s", mine.Pos, name, name))
	}
	return errs
}

func sameInvocation(a, b *profile.Invocation) bool {
	switch {
	case a == nil || b == nil:
		return a == b
	case a.Body != nil && b.Body != nil:
		return strings.TrimSpace(a.Body.Source) == strings.TrimSpace(b.Body.Source)
	case a.Static != nil && b.Static != nil:
		return a.Static.Content == b.Static.Content
	}
	return false
}
