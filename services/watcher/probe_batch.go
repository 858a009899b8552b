package watcher

import (
	"cmp"
	"context"
	"fmt"
	"github.com/gridwire/gridwire/pkg/recache"
	"log/slog"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/pkg/cluster"
	"github.com/gridwire/gridwire/pkg/shellquote"
	"github.com/gridwire/gridwire/pkg/target"
)

// Runner runs one shell script on a host of a cluster (target.Local, target.SSH); an
// error means the host could not be asked.
type Runner interface {
	Run(ctx context.Context, script string) (target.Output, error)
}

// ScriptProber observes jobs started through a profile: on an ssh cluster or a batch
// system. Each poll makes one call per host for all of its jobs: the profile's
// GET_JOB_STATUS with every native ID in $GW_NATIVE_IDS, then a look at each job's exit
// status file, in one script. Native states map to canonical ones through the profile's
// table; a job the status call no longer lists takes the profile's absent state. The
// exit status file, not the LRMS, says how a job ended.
type ScriptProber struct {
	Cluster string
	// Lookup loads a job's state: its incarnation (scripts, patterns, state table) and
	// the host it started on. Results are cached per job.
	Lookup func(ctx context.Context, jobID string) (events.State, error)
	// Runner returns the runner for a host as the started event names it.
	Runner func(host string) Runner
	// MaxCallsPerMinute caps status calls to the cluster (0: no cap); polls wait for
	// their turn rather than hammer the LRMS.
	MaxCallsPerMinute int
	// MaxJobsPerCall bounds the jobs one call asks about (0: MaxJobsPerCall).
	MaxJobsPerCall int
	Logger         *slog.Logger

	mu       sync.Mutex
	jobs     map[string]probeInfo
	patterns recache.Cache // native ID and status patterns, compiled once
	next     time.Time     // earliest start of the next call under the cap
}

// probeInfo is what probing needs of one job.
type probeInfo struct {
	host, workDir, nativeID string
	inc                     *events.IncarnatedData
}

// MaxJobsPerCall is the default bound on the jobs one status call asks about: their
// native IDs travel in one exported variable (and in the status script's arguments),
// which the kernel refuses past 128 KiB; a larger poll makes several calls.
const MaxJobsPerCall = 1000

// Default ceilings on status calls per cluster and minute.
const (
	DefaultBatchCallsPerMinute = 60
	DefaultHostCallsPerMinute  = 600
)

// NewProber is the prober a cluster needs: ForkProber for a fork cluster running jobs
// as local processes, a ScriptProber on this host for a batch system whose clients are
// here, and a ScriptProber over SSH (NewSSHProber) for an ssh cluster. The returned func
// releases its connections.
//
// maxCallsPerMinute caps status calls per cluster; 0 takes the default for its kind:
// DefaultBatchCallsPerMinute for a batch system (its status commands are shared by
// every user of the cluster), DefaultHostCallsPerMinute for processes on ssh hosts.
func NewProber(cl cluster.Cluster, lookup func(context.Context, string) (events.State, error), maxCallsPerMinute int, log *slog.Logger) (Prober, func(), error) {
	batch := !strings.EqualFold(cl.LRMS, "fork") && !strings.EqualFold(cl.Profile, "fork")
	if maxCallsPerMinute == 0 {
		maxCallsPerMinute = DefaultHostCallsPerMinute
		if batch {
			maxCallsPerMinute = DefaultBatchCallsPerMinute
		}
	}
	switch {
	case cl.Kind == cluster.KindFork && !batch:
		return ForkProber{}, func() {}, nil
	case cl.Kind == cluster.KindFork:
		p := &ScriptProber{Cluster: cl.Name, Lookup: lookup, MaxCallsPerMinute: maxCallsPerMinute, Logger: log,
			Runner: func(string) Runner { return target.Local{} }}
		return p, func() {}, nil
	}
	return NewSSHProber(cl, lookup, maxCallsPerMinute, log)
}

// Probe implements Prober.
func (p *ScriptProber) Probe(ctx context.Context, jobs []Watched) (map[string]Observation, error) {
	groups := map[string][]probeJob{}
	for _, w := range jobs {
		info, err := p.info(ctx, w)
		if err != nil {
			return nil, err
		}
		status := info.inc.Scripts[events.ScriptStatus].Body
		key := info.host + "\x00" + status
		groups[key] = append(groups[key], probeJob{w: w, info: info})
	}
	out := make(map[string]Observation, len(jobs))
	keys := make([]string, 0, len(groups))
	for k := range groups {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		for group := range slices.Chunk(groups[k], cmp.Or(p.MaxJobsPerCall, MaxJobsPerCall)) {
			if err := p.probeGroup(ctx, group, out); err != nil {
				return nil, err
			}
		}
	}
	p.prune(jobs)
	return out, nil
}

type probeJob struct {
	w    Watched
	info probeInfo
}

// probeGroup asks one host about jobs that share a status script.
func (p *ScriptProber) probeGroup(ctx context.Context, group []probeJob, out map[string]Observation) error {
	host, inc := group[0].info.host, group[0].info.inc
	re, err := p.patterns.Compile(inc.StatusPattern)
	if err != nil {
		return fmt.Errorf("cluster %s: status pattern: %w", p.Cluster, err)
	}
	if err := p.wait(ctx); err != nil {
		return err
	}
	script, err := probeScript(group)
	if err != nil {
		return fmt.Errorf("cluster %s: %w", p.Cluster, err)
	}
	res, err := p.Runner(host).Run(ctx, script)
	if err != nil {
		return fmt.Errorf("asking %s about %d jobs: %w", host, len(group), err)
	}
	if !res.OK() {
		return fmt.Errorf("asking %s about %d jobs: the probe exited %d: %s", host, len(group), res.ExitCode, target.Excerpt(firstOutput(res), 300))
	}
	states, exits, err := parseProbe(res.Stdout, re)
	if err != nil {
		return fmt.Errorf("asking %s: %w", host, err)
	}
	for i, j := range group {
		out[j.w.JobID] = observe(j.info, states, exits, i)
	}
	return nil
}

// probeScript installs missing static scripts, runs GET_JOB_STATUS with every native
// ID, then prints each job's exit status file, by index. The status call comes first so
// a job that ends between the two looks is seen with its exit status.
func probeScript(group []probeJob) (string, error) {
	inc := group[0].info.inc
	statics := make([]target.Static, 0, len(inc.StaticScripts))
	for n, s := range inc.StaticScripts {
		statics = append(statics, target.Static{Name: n, Location: s.Location, Body: s.Body})
	}
	install, err := target.InstallScript(statics)
	if err != nil {
		return "", err
	}
	ids := make([]string, len(group))
	for i, j := range group {
		ids[i] = j.info.nativeID
	}
	var b strings.Builder
	b.WriteString(install)
	b.WriteString("(\n" + inc.Scripts[events.ScriptStatus].Body + "\n)\necho \"gw:exits $?\"\n")
	// read, a builtin, not $(cat ...): a poll of many ended jobs forks nothing per job.
	// gridwire's own exit status file, else the one the GPE OS profile spec names.
	b.WriteString("gwx() { if [ -f \"$2/" + events.ExitFile + "\" ]; then gwf=\"$2/" + events.ExitFile + "\"; else gwf=\"$2/" + events.GPEExitFile +
		"\"; fi; [ -f \"$gwf\" ] && read -r gwc <\"$gwf\" && printf 'gw:exit %s %s\\n' \"$1\" \"$gwc\"; :; }\n")
	for i, j := range group {
		fmt.Fprintf(&b, "gwx %d %s\n", i, shellquote.Quote(j.info.workDir))
	}
	return target.WithVars(map[string]string{events.VarNativeIDList: strings.Join(ids, " ")}, b.String()), nil
}

// parseProbe reads native states by native ID, and exit codes by job index.
func parseProbe(stdout []byte, re *regexp.Regexp) (map[string]string, map[int]exitLine, error) {
	status, exitPart, found := strings.Cut(string(stdout), "gw:exits ")
	if !found {
		return nil, nil, fmt.Errorf("malformed probe output %q", target.Excerpt(stdout, 300))
	}
	rc, exitPart, _ := strings.Cut(exitPart, "\n")
	if rc != "0" {
		return nil, nil, fmt.Errorf("%s exited %s: %s", events.ScriptStatus, rc, target.Excerpt([]byte(status), 300))
	}
	idGroup, stateGroup := re.SubexpIndex("id"), re.SubexpIndex("state")
	states := map[string]string{}
	for _, line := range strings.Split(status, "\n") {
		m := re.FindStringSubmatch(strings.TrimRight(line, "\r"))
		if m != nil && idGroup > 0 && stateGroup > 0 {
			states[m[idGroup]] = m[stateGroup]
		}
	}
	exits := map[int]exitLine{}
	for _, line := range strings.Split(exitPart, "\n") {
		f := strings.SplitN(strings.TrimSpace(line), " ", 3)
		if len(f) != 3 || f[0] != "gw:exit" {
			continue
		}
		i, err1 := strconv.Atoi(f[1])
		code, reason, ok := target.ParseExitLine(f[2])
		if err1 == nil && ok {
			exits[i] = exitLine{code, reason}
		}
	}
	return states, exits, nil
}

// observe turns what the host said of one job into an observation.
// exitLine is a job's exit status line: its code and, when the job script ended the
// program itself, why.
type exitLine struct {
	code   int
	reason string
}

func observe(info probeInfo, states map[string]string, exits map[int]exitLine, i int) Observation {
	native, listed := states[info.nativeID]
	if x, ok := exits[i]; ok {
		return Observation{Exited: true, ExitCode: x.code, Reason: x.reason, NativeState: native}
	}
	canonical := info.inc.AbsentState
	if listed {
		canonical = info.inc.NativeStates[native]
	} else if canonical == "" {
		canonical = "ENDED"
	}
	switch canonical {
	case "ENDED":
		return Observation{Gone: true, NativeState: native}
	case string(events.StatusQueued), string(events.StatusRunning), string(events.StatusHeld):
		return Observation{State: events.Status(canonical), NativeState: native}
	}
	return Observation{NativeState: native} // a native state the table does not know
}

// info is the job's probing facts, loaded once.
func (p *ScriptProber) info(ctx context.Context, w Watched) (probeInfo, error) {
	p.mu.Lock()
	info, ok := p.jobs[w.JobID]
	p.mu.Unlock()
	if ok {
		return info, nil
	}
	st, err := p.Lookup(ctx, w.JobID)
	if err != nil {
		return probeInfo{}, fmt.Errorf("loading job %s: %w", w.JobID, err)
	}
	if st.Incarnation == nil || st.Incarnation.Scripts[events.ScriptStatus].Body == "" {
		return probeInfo{}, fmt.Errorf("job %s has no %s script", w.JobID, events.ScriptStatus)
	}
	info = probeInfo{host: st.Host, workDir: st.Incarnation.WorkDir, nativeID: firstOf(w.NativeID, st.NativeID), inc: st.Incarnation}
	if w.WorkDir != "" {
		info.workDir = w.WorkDir
	}
	p.mu.Lock()
	if p.jobs == nil {
		p.jobs = map[string]probeInfo{}
	}
	p.jobs[w.JobID] = info
	p.mu.Unlock()
	return info, nil
}

// prune keeps the cache from outgrowing the jobs followed.
func (p *ScriptProber) prune(batch []Watched) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.jobs) <= 2*len(batch)+1024 {
		return
	}
	keep := make(map[string]probeInfo, len(batch))
	for _, w := range batch {
		if info, ok := p.jobs[w.JobID]; ok {
			keep[w.JobID] = info
		}
	}
	p.jobs = keep
}

// wait spaces calls to at most MaxCallsPerMinute.
func (p *ScriptProber) wait(ctx context.Context) error {
	if p.MaxCallsPerMinute <= 0 {
		return nil
	}
	gap := time.Minute / time.Duration(p.MaxCallsPerMinute)
	p.mu.Lock()
	now := time.Now()
	at := p.next
	if at.Before(now) {
		at = now
	}
	p.next = at.Add(gap)
	p.mu.Unlock()
	d := time.Until(at)
	if d <= 0 {
		return nil
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// firstOutput is what a failed probe said: its error output, else its output.
func firstOutput(o target.Output) []byte {
	if len(o.Stderr) > 0 {
		return o.Stderr
	}
	return o.Stdout
}

func firstOf(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}
