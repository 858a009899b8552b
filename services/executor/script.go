package executor

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/pkg/recache"
	"github.com/gridwire/gridwire/pkg/shellquote"
	"github.com/gridwire/gridwire/pkg/target"
)

// ScriptTarget starts jobs through the cluster's profile: the JOB script is written into
// the job's working directory on the target, the profile's static scripts into BIN
// storage, and START runs there; its output, parsed with the profile's native ID
// pattern, is the job's native ID. It serves remote hosts (target.SSH: a fork-like
// profile's START detaches the job on the host, a batch profile's submits it) and batch
// systems reached from this host (target.Local). Starts on one host that come while
// another is under way go together (startBatcher): one shell on the host writes every
// JOB script of the batch and runs every START (startScript), since a process and a
// session are what a start costs most.
//
// Starting is idempotent through files beside the job on the target: START runs only
// under a start lock (.gridwire/start.lock, created exclusively), and its output and
// exit status are kept in the lock file (its error output in .gridwire/start.err). An
// attempt that finds them adopts the run they record instead of starting another; one
// that finds the lock without them waits for the attempt holding it, up to StaleLock.
type ScriptTarget struct {
	Cluster string
	Shells  []Shell // one per host; a job always goes to the same one
	// Batch says START queues the job in an LRMS (not RUNNING at once).
	Batch bool
	// StaleLock is how long a start lock without a recorded result is trusted to belong
	// to a START still running; default 5 minutes.
	StaleLock time.Duration
	// Poll is the wait between looks at another attempt's START; default 1s.
	Poll   time.Duration
	Logger *slog.Logger

	// Sessions is how many start scripts run at once on one host, each starting every
	// job that was waiting when it began; default 4. On a batch target a script counts
	// only until every START of it is under way: it then waits for them on its own,
	// and at most 16 scripts run at once on one host either way (maxScriptsInFlight).
	Sessions int
	// Properties, when set, gives DDS tasks the way to the property API.
	Properties *Properties

	mu       sync.Mutex
	patterns recache.Cache            // native ID and status patterns, compiled once
	statics  map[string]bool          // host + location of static scripts known to be installed
	batchers map[string]*startBatcher // per host
}

// Files of the start lock, relative to the working directory.
const (
	startLock = events.ControlDir + "/start.lock" // START's output, then its exit status (statusLine)
	startErr  = events.ControlDir + "/start.err"  // START's error output
	// Where executors before batching kept START's status and output: read for runs
	// they recorded.
	startRC  = events.ControlDir + "/start.rc"
	startOut = events.ControlDir + "/start.out"
)

// Start implements Target.
func (s *ScriptTarget) Start(ctx context.Context, st events.State) (events.StartedData, error) {
	if st.Incarnation == nil {
		return events.StartedData{}, fmt.Errorf("job %s has no absolute working directory", st.JobID)
	}
	return s.start(ctx, st, st.Incarnation.Scripts[events.ScriptStart].Body)
}

// start starts the job with startBody for its START.
func (s *ScriptTarget) start(ctx context.Context, st events.State, startBody string) (events.StartedData, error) {
	inc := st.Incarnation
	if inc == nil || !strings.HasPrefix(inc.WorkDir, "/") {
		return events.StartedData{}, fmt.Errorf("job %s has no absolute working directory", st.JobID)
	}
	start, ok := events.Script{Body: startBody}, startBody != ""
	jobScript, okJob := inc.Scripts[events.ScriptJob]
	if !ok || !okJob || start.Body == "" || jobScript.Body == "" {
		return events.StartedData{}, fmt.Errorf("job %s lacks its %s or %s script", st.JobID, events.ScriptStart, events.ScriptJob)
	}
	re, err := s.patterns.Compile(inc.NativeIDPattern)
	if err != nil {
		return events.StartedData{}, fmt.Errorf("job %s: native ID pattern: %w", st.JobID, err)
	}
	sh := s.shellFor(st)
	if err := s.installStatics(ctx, sh, inc.StaticScripts); err != nil {
		return events.StartedData{}, fmt.Errorf("installing static scripts on %s: %w", sh.Host(), err)
	}
	env, err := s.Properties.env(ctx, st, sh, s.Batch)
	if err != nil {
		return events.StartedData{}, err
	}
	job := startJob{id: st.JobID, workDir: inc.WorkDir, start: start.Body, body: jobScript.Body,
		list: inc.Scripts[events.ScriptList+":DIR"].Body, env: env}
	if s.Batch {
		if job.envFile, job.env, err = batchEnv(env, jobScript.Body); err != nil {
			return events.StartedData{}, fmt.Errorf("job %s: the property API's file: %w", st.JobID, err)
		}
	}
	if err := job.check(); err != nil {
		return events.StartedData{}, err
	}
	for {
		r := s.batcher(sh).start(ctx, job)
		if r.err != nil {
			return events.StartedData{}, fmt.Errorf("starting job %s on %s: %w", st.JobID, sh.Host(), r.err)
		}
		v := r.verdict
		switch v.verdict {
		case "busy":
			select {
			case <-ctx.Done():
				return events.StartedData{}, ctx.Err()
			case <-time.After(s.poll()):
			}
			continue
		case "stale":
			s.log().Warn("took over an abandoned start", "job", st.JobID, "host", sh.Host())
			continue
		case "err":
			return events.StartedData{}, fmt.Errorf("job %s on %s, working directory %q: %s", st.JobID, sh.Host(), inc.WorkDir, v.reason)
		}
		if v.rc != 0 {
			return events.StartedData{}, fmt.Errorf("START of job %s on %s failed: %s", st.JobID, sh.Host(),
				target.Output{Stdout: v.out, Stderr: v.errOut, ExitCode: v.rc}.Describe())
		}
		id, err := nativeID(re, v.out)
		if err != nil {
			return events.StartedData{}, fmt.Errorf("START of job %s on %s: %w", st.JobID, sh.Host(), err)
		}
		return events.StartedData{Cluster: s.Cluster, Host: sh.Host(), HostKey: r.hostKey, NativeID: id,
			Running: !s.Batch, Adopted: v.verdict != "ran"}, nil
	}
}

// FindRun implements RunFinder with one script on the job's host that reads the start
// lock as a start does (gw_report) without taking it: a run recorded there is found; a
// lock without a status younger than StaleLock is a start in progress; an abandoned
// lock is moved aside and a failed START's lock released, as a start would do.
func (s *ScriptTarget) FindRun(ctx context.Context, st events.State) (events.StartedData, bool, error) {
	inc := st.Incarnation
	if inc == nil || !strings.HasPrefix(inc.WorkDir, "/") {
		return events.StartedData{}, false, nil
	}
	re, err := s.patterns.Compile(inc.NativeIDPattern)
	if err != nil {
		return events.StartedData{}, false, fmt.Errorf("job %s: native ID pattern: %w", st.JobID, err)
	}
	sh := s.shellAt(st.Host, st)
	nonce := newNonce()
	wd := shellquote.Quote(inc.WorkDir)
	script := "{\nexec </dev/null\ngw_nonce=" + nonce + " gw_stale=" + strconv.Itoa(int(max(s.stale(), time.Minute)/time.Minute)) + "\n" +
		startFuncs + "gw_k=0\n" +
		"if cd " + wd + " 2>/dev/null && { [ -e " + startLock + " ] || [ -s " + startRC + " ]; }; then gw_v0=held; gw_report 0 " + wd + "; else gw_say none; fi\n" +
		"exit 0\n}\n"
	out, err := sh.Feed(ctx, script)
	if err != nil {
		return events.StartedData{}, false, err
	}
	if out.ExitCode != 0 {
		return events.StartedData{}, false, fmt.Errorf("looking for a run of job %s on %s: %s", st.JobID, sh.Host(), out.Describe())
	}
	if bytes.Contains(out.Stdout, []byte("gw:"+nonce+":0:none\n")) {
		return events.StartedData{}, false, nil
	}
	verdicts, ok := parseStart(nonce, out.Stdout, 1)
	v := verdicts[0]
	switch {
	case !ok[0]:
		return events.StartedData{}, false, fmt.Errorf("looking for a run of job %s on %s: no answer in %q", st.JobID, sh.Host(), target.Excerpt(out.Stdout, 200))
	case v.verdict == "busy":
		return events.StartedData{}, false, errStartInProgress
	case v.verdict == "stale":
		return events.StartedData{}, false, nil
	case v.verdict == "err":
		return events.StartedData{}, false, fmt.Errorf("job %s on %s, working directory %q: %s", st.JobID, sh.Host(), inc.WorkDir, v.reason)
	case v.rc != 0:
		return events.StartedData{}, false, nil // START failed: nothing runs
	}
	id, err := nativeID(re, v.out)
	if err != nil {
		return events.StartedData{}, false, fmt.Errorf("START of job %s on %s: %w", st.JobID, sh.Host(), err)
	}
	return events.StartedData{Cluster: s.Cluster, Host: sh.Host(), HostKey: out.HostKey, NativeID: id,
		Running: !s.Batch, Adopted: true}, true, nil
}

// batcher is the group commit of starts on sh's host.
func (s *ScriptTarget) batcher(sh Shell) *startBatcher {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.batchers == nil {
		s.batchers = map[string]*startBatcher{}
	}
	b := s.batchers[sh.Host()]
	if b == nil {
		b = &startBatcher{sh: sh, sessions: s.Sessions, script: s.startScript, grace: s.stale() / 2, limit: s.stale(),
			inFlight: make(chan struct{}, maxScriptsInFlight)}
		if b.sessions <= 0 {
			b.sessions = 4
		}
		s.batchers[sh.Host()] = b
	}
	return b
}

// Control implements Controller: the profile's script for the action, with the job's
// native ID, on the host that started it.
func (s *ScriptTarget) Control(ctx context.Context, st events.State, script string) (target.Output, error) {
	return runControl(ctx, s.shellAt(st.Host, st), st, script, !s.Batch)
}

// runControl runs one of the job's control scripts (ABORT, HOLD, RESUME) on sh. pids
// says the target's native IDs are process IDs (the fork LRMS, here or over ssh). A
// native ID the script must not be given (checkNativeID) is refused, as a script that
// failed: the request is recorded as action_failed, with why.
func runControl(ctx context.Context, sh Shell, st events.State, script string, pids bool) (target.Output, error) {
	if st.Incarnation == nil {
		return target.Output{}, fmt.Errorf("job %s has no incarnation", st.JobID)
	}
	body, ok := st.Incarnation.Scripts[script]
	if !ok || body.Body == "" {
		return target.Output{ExitCode: -1, Stderr: []byte("the profile has no " + script + " script")}, nil
	}
	if err := checkNativeID(st.NativeID, pids); err != nil {
		return target.Output{ExitCode: -1, Stderr: []byte("not running " + script + ": " + err.Error())}, nil
	}
	vars := map[string]string{events.VarJobID: st.JobID, events.VarWorkDir: st.Incarnation.WorkDir, events.VarNativeID: st.NativeID}
	return sh.Run(ctx, target.WithVars(vars, body.Body))
}

// checkNativeID refuses a native ID that a control script must not be handed: one that
// begins with '-' or holds a space or a control character (a template passes it as a
// word: it would be read as an option, or as more than one ID), and, where native IDs
// are process IDs, anything but a decimal PID above 1. The fork profile's ABORT, HOLD and
// RESUME signal the process group -ID: an ID of 1 (or -1, or 0) would signal every
// process the gateway's user may signal, or the gateway's own group. A recorded native
// ID comes from the log, where another system may have written it (an external started
// event).
func checkNativeID(id string, pids bool) error {
	if id == "" || id[0] == '-' || strings.IndexFunc(id, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0 {
		return fmt.Errorf("native ID %q is not one a script may be given", id)
	}
	if pids {
		if n, err := strconv.Atoi(id); err != nil || n < 2 || strconv.Itoa(n) != id {
			return fmt.Errorf("native ID %q is not a process ID above 1", id)
		}
	}
	return nil
}

// shellFor picks the job's host: the one its incarnation chose (host requirements,
// a DDS collection's host), else one spread over the hosts by the job's ID, the same for
// every delivery.
func (s *ScriptTarget) shellFor(st events.State) Shell {
	if st.Incarnation != nil && st.Incarnation.Host != "" {
		for _, sh := range s.Shells {
			if sh.Host() == st.Incarnation.Host {
				return sh
			}
		}
	}
	h := fnv.New32a()
	h.Write([]byte(st.JobID))
	return s.Shells[int(h.Sum32()%uint32(len(s.Shells)))]
}

// shellAt is the shell of the host a job started on.
func (s *ScriptTarget) shellAt(host string, st events.State) Shell {
	for _, sh := range s.Shells {
		if sh.Host() == host {
			return sh
		}
	}
	return s.shellFor(st)
}

// nativeID applies the profile's pattern to START's output: group 1 of the first line
// that matches (or of the whole output, for a multi-line pattern).
func nativeID(re *regexp.Regexp, out []byte) (string, error) {
	for _, line := range strings.Split(string(out), "\n") {
		if m := re.FindStringSubmatch(line); len(m) > 1 && m[1] != "" {
			return m[1], nil
		}
	}
	if m := re.FindSubmatch(out); len(m) > 1 && len(m[1]) > 0 {
		return string(m[1]), nil
	}
	return "", fmt.Errorf("no native ID in START's output %q (pattern %s)", target.Excerpt(out, 200), re)
}

// installStatics installs the profile's static scripts that the host may lack, with one
// script on the host (target.InstallScript); a static script's location carries its
// content hash, so one that exists is the right one. Locations installed on a host are
// remembered, so a host is asked once per location while this process lives.
func (s *ScriptTarget) installStatics(ctx context.Context, sh Shell, statics map[string]events.Script) error {
	var missing []target.Static
	s.mu.Lock()
	for name, sc := range statics {
		if !s.statics[sh.Host()+"\x00"+sc.Location] {
			missing = append(missing, target.Static{Name: name, Location: sc.Location, Body: sc.Body})
		}
	}
	s.mu.Unlock()
	if len(missing) == 0 {
		return nil
	}
	script, err := target.InstallScript(missing)
	if err != nil {
		return err
	}
	out, err := sh.Feed(ctx, "{\nexec </dev/null\n"+script+"}\n")
	if err != nil {
		return err
	}
	if !out.OK() {
		return errors.New(out.Describe())
	}
	s.mu.Lock()
	if s.statics == nil {
		s.statics = map[string]bool{}
	}
	for _, sc := range missing {
		s.statics[sh.Host()+"\x00"+sc.Location] = true
	}
	s.mu.Unlock()
	return nil
}

func (s *ScriptTarget) stale() time.Duration {
	if s.StaleLock > 0 {
		return s.StaleLock
	}
	return 5 * time.Minute
}

func (s *ScriptTarget) poll() time.Duration {
	if s.Poll > 0 {
		return s.Poll
	}
	return time.Second
}

func (s *ScriptTarget) log() *slog.Logger {
	if s.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return s.Logger
}
