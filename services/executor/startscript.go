package executor

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/pkg/envfile"
	"github.com/gridwire/gridwire/pkg/shellquote"
)

// startJob is one job's part of a start script: what the script writes and runs for it.
type startJob struct {
	id      string // GW_JOB_ID
	workDir string // GW_WORKDIR, absolute
	start   string // the rendered START script
	body    string // the rendered JOB script, written to .gridwire/job.sh
	list    string // the profile's LIST DIR script (FILE is GW_PATH), "" if none
	// env is exported for START (and so for the job it starts): the property API's
	// address and the task's credential, for a DDS task with properties.
	env []events.EnvVar
	// envFile, for such a task on a batch target, is what the script writes to
	// envfile.PropertyFile instead (batchEnv), before START.
	envFile string
}

// errNUL refuses values a shell word cannot carry.
var errNUL = errors.New("contains a NUL byte, which a shell script cannot carry")

// check refuses a job whose values the start script cannot carry literally.
func (j startJob) check() error {
	for name, v := range map[string]string{"job ID": j.id, "working directory": j.workDir, events.ScriptStart: j.start, events.ScriptJob: j.body,
		"property file": j.envFile} {
		if strings.IndexByte(v, 0) >= 0 {
			return fmt.Errorf("job %s: its %s %w", j.id, name, errNUL)
		}
	}
	for _, v := range j.env {
		if strings.IndexByte(v.Value, 0) >= 0 || !validEnvName(v.Name) {
			return fmt.Errorf("job %s: its variable %s cannot be exported", j.id, v.Name)
		}
	}
	return nil
}

// size is roughly what the job adds to a start script.
func (j startJob) size() int {
	n := len(j.id) + len(j.workDir) + len(j.start) + len(j.body) + len(j.envFile) + 64
	for _, v := range j.env {
		n += len(v.Name) + len(v.Value) + 16
	}
	return n
}

// validEnvName reports whether name is a shell variable name.
func validEnvName(name string) bool {
	for i, c := range name {
		ok := c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || i > 0 && c >= '0' && c <= '9'
		if !ok {
			return false
		}
	}
	return name != ""
}

// startVerdict is what the start script found and did for one job.
type startVerdict struct {
	verdict string // ran, done (an earlier attempt's run), busy, stale, err
	rc      int    // START's exit status (ran, done)
	out     []byte // START's standard output (ran, done)
	errOut  []byte // START's standard error (ran, done)
	reason  string // why the script could not start the job (err)
}

// newNonce is the per-script marker of the script's own lines, so that nothing START
// prints can pass for one of them.
func newNonce() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Files beside the job that the start script keeps, relative to the working directory.
const (
	jobScriptNew = events.ScriptFile + ".new"
	// propertyFileNew is where envfile.PropertyFile is created, exclusively and so with
	// the script's umask 077 (0600), before it is renamed into place.
	propertyFileNew = envfile.PropertyFile + ".new"
	startLockStale  = startLock + ".abandoned-$$"
	startLockFail   = startLock + ".failed-$$"
	// statusLine begins the line, after START's output in the lock, that records
	// START's exit status: the lock is empty while START runs, holds its output as it
	// comes, and is a run that exists once this line is there.
	statusLine = "gw-start-status "
)

// startScript is one script, run by one /bin/sh reading it from its standard input,
// that starts every job of a batch on one host: for each, the start lock, the JOB
// script and START, exactly as one job's start was made before batching, with every
// value a quoted literal. Processes and new files are what a start costs (on the
// project's loaded VM a process about 0.6 ms, creating a file about 0.6 ms, opening
// one that exists 20 us), so it spends as few as it can: one shell for the batch, one
// mkdir for the control directories that are missing, then per job one subshell for
// START (two on a batch target, below) and three new files: the JOB script, the lock, which takes START's standard
// output and then its exit status, and START's standard error.
//
// Crash safety, per job (the properties of the single-job wrapper it replaces):
//   - START runs only under the start lock (.gridwire/start.lock, created exclusively by
//     noclobber). The JOB script is written after the lock is taken, so a run that
//     exists is never rewritten under its feet: a fresh one is created exclusively, one
//     left by a failed or abandoned attempt is replaced through a rename.
//   - START's output and status are kept beside the job before anything is printed, so
//     the executor's death (its end of the pipe closing) cannot come between START and
//     that record. The status is one short line appended to the lock after START's
//     output (statusLine); a reader takes the lock for a run only once it finds that
//     line, else it waits ("busy").
//   - A lock with a status is a run that exists: it is reported ("done") and adopted,
//     never started again. A lock without one older than StaleLock was left by an
//     attempt that died before START finished: it is moved aside ("stale") for a retry.
//   - Before taking over after an abandoned lock, the profile's LIST template looks
//     for the files the JOB script writes when it runs (gw_ran); a job that ran is not
//     started again.
//   - A failed START (non-zero status) is reported, then its lock is moved aside so that
//     a retry may start the job, and the release is reported too (its caller is told
//     only then, so a retry never finds the lock still there); if the script dies
//     between the two, the next attempt finds the failure, reports it and releases.
//   - Each START runs in its own subshell through eval, so neither its failure, its
//     exit nor a syntax error in it reaches the other jobs.
//   - A job is reported only once its START's status is recorded. A shell whose
//     reader went away dies at its next print, before it takes another lock; the
//     background subshells that record a batch target's statuses print nothing, so
//     they record them whatever becomes of the script's shell.
//
// Each job is reported as soon as it can be, and its caller goes on at once
// (startReader), not when the whole script has ended. For a batch target (Batch) the
// STARTs of a script run at once, each in the background with the record of its status
// (a second subshell per job): a batch system's submit command mostly waits on its
// server, so one after the other they would take as long as they wait. Once every
// START is under way the script says so (launchedMark), and the next script may begin
// while this one waits for its STARTs (gw_wait) and reports each job, in the batch's
// order, as its START ends. Otherwise (a START that forks the job on the host) they run
// in turn, one subshell each, and each job is reported before the next is taken.
//
// A DDS task with properties on a batch target (envFile) gets one file more, after its
// JOB script and before its START: the property API's file (envfile.PropertyFile),
// created exclusively under the umask (0600, the starting user's) and renamed into place,
// so the job never reads it half written; one it cannot write fails the start.
//
// START's standard error is kept for the report only: an attempt that adopts a run
// reports the error output kept beside it.
//
// The script runs under umask 077, START included (the JOB script's prologue sets the
// same for the job): the JOB script is written 0600, where the SFTP upload made it 0700
// (chmod would be a process per job); the shipped profiles run it with /bin/sh or hand
// it to sbatch or qsub, which read it.
//
// The whole script is one { } group, which the shell parses to the end before it runs
// any of it: a script cut short on its way (a dropped connection) runs nothing. Its
// commands never read its standard input, which is the script itself (exec </dev/null).
// Runs recorded by the single-job wrapper of earlier executors (an empty lock, the
// status in .gridwire/start.rc, the output in start.out) are read too, and rewritten in
// this form, so that an upgrade never starts a job twice.
func (s *ScriptTarget) startScript(nonce string, jobs []startJob) string {
	minutes := strconv.Itoa(int(max(s.stale(), time.Minute) / time.Minute))
	var b strings.Builder
	b.WriteString("{\nexec </dev/null\numask 077\ngw_nonce=" + nonce + " gw_stale=" + minutes + " gw_pe=\n")
	b.WriteString(startFuncs)
	if s.Batch {
		b.WriteString("gw_par=1\n")
	} else {
		b.WriteString("gw_par=\n")
	}
	b.WriteString("set --\nfor gw_d in")
	for _, j := range jobs {
		b.WriteString(" " + shellquote.Quote(j.workDir+"/"+events.ControlDir))
	}
	b.WriteString("; do [ -d \"$gw_d\" ] || set -- \"$@\" \"$gw_d\"; done\n[ $# -eq 0 ] || mkdir -p -- \"$@\" 2>/dev/null\n")
	withEnv := slices.ContainsFunc(jobs, func(j startJob) bool { return len(j.env) > 0 })
	withFile := slices.ContainsFunc(jobs, func(j startJob) bool { return j.envFile != "" })
	for k, j := range jobs {
		b.WriteString(events.VarJobID + "=" + shellquote.Quote(j.id) + " " + events.VarWorkDir + "=" + shellquote.Quote(j.workDir) + "\n")
		b.WriteString("export " + events.VarJobID + " " + events.VarWorkDir + "\n")
		if withEnv {
			writeEnv(&b, j.env)
		}
		if withFile {
			b.WriteString("gw_pe=" + shellquote.Quote(j.envFile) + "\n")
		}
		b.WriteString("gw_s=" + shellquote.Quote(j.start) + "\ngw_j=" + shellquote.Quote(j.body) + "\ngw_ls=" + shellquote.Quote(j.list) + "\n")
		b.WriteString("gw_take " + strconv.Itoa(k) + "\n")
		if !s.Batch {
			b.WriteString("gw_report " + strconv.Itoa(k) + ` "$GW_WORKDIR"` + "\n")
		}
	}
	if s.Batch {
		b.WriteString("printf 'gw:%s:" + launchedMark + "\\n' \"$gw_nonce\"\n")
		for k, j := range jobs {
			b.WriteString("gw_wait " + strconv.Itoa(k) + "; gw_report " + strconv.Itoa(k) + " " + shellquote.Quote(j.workDir) + "\n")
		}
	}
	b.WriteString("exit 0\n}\n")
	return b.String()
}

// writeEnv exports a job's own variables, and unsets the property API's that an
// earlier job of the same script exported, so no job sees another's credential.
func writeEnv(b *strings.Builder, env []events.EnvVar) {
	b.WriteString("unset " + events.VarPropertyURL + " " + events.VarPropertyToken + "\n")
	for _, v := range env {
		b.WriteString(v.Name + "=" + shellquote.Quote(v.Value) + "\nexport " + v.Name + "\n")
	}
}

// startFuncs are the start script's shell functions. gw_take takes job $1's start
// lock, writes its JOB script, writes the property API's file when gw_pe holds one
// (gw_penv), runs its START (GW_WORKDIR, gw_j and gw_s hold the job's values) and notes
// in gw_v$1 what it found: ran, held (the lock was there), nodir, nojob, noenv; a
// START it ran in the background leaves its PID in gw_p$1, which gw_wait $1 waits for.
// gw_report $1 DIR reads the lock back and prints the job's verdict, START's output and
// error output between the script's markers (gw_say), and releases the lock of a failed
// START (and says so). gw_scan reads a lock: START's output into gw_o, its
// status into gw_rc (false while there is none). gw_ran, when an abandoned lock lies
// aside, runs the profile's LIST DIR template on the control directory: the JOB
// script's standard output or exit status file there means the abandoned START ran the
// job, which is then recorded as a failed START (status 125, errStartedBefore) instead
// of being started again. A batch job still queued has written nothing yet: LIST cannot
// see it, and the takeover starts it again, as before.
var startFuncs = `gw_say() { printf 'gw:%s:%s:%s\n' "$gw_nonce" "$gw_k" "$1"; }
gw_cat() { [ ! -f "$1" ] || while IFS= read -r gw_l || [ -n "$gw_l" ]; do printf '%s\n' "$gw_l"; done <"$1"; }
gw_scan() {
  gw_o= gw_rc=
  [ -f "$1" ] || return 1
  while IFS= read -r gw_l || [ -n "$gw_l" ]; do
    case $gw_l in
    "` + statusLine + `"*) gw_rc=${gw_l#"` + statusLine + `"} ;;
    *) gw_o="$gw_o$gw_l
" ;;
    esac
  done <"$1"
  [ -n "$gw_rc" ]
}
gw_take() {
  eval "gw_p$1="
  if ! cd "$GW_WORKDIR" 2>/dev/null || [ ! -d ` + events.ControlDir + ` ]; then eval "gw_v$1=nodir"; return; fi
  set -C
  if { true >` + startLock + `; } 2>/dev/null; then
    set +C
    if gw_ran; then
      printf '%s\n' "` + errStartedBefore + `" >` + startErr + `
      printf '\n` + statusLine + `%s\n' 125 >>` + startLock + `
      eval "gw_v$1=ran"; return
    fi
    set -C
    if ! { printf '%s' "$gw_j" >` + events.ScriptFile + `; } 2>/dev/null; then
      set +C
      if ! { printf '%s' "$gw_j" >` + jobScriptNew + ` && mv -f ` + jobScriptNew + ` ` + events.ScriptFile + `; } 2>/dev/null; then
        mv -f ` + startLock + ` "` + startLockFail + `" 2>/dev/null; eval "gw_v$1=nojob"; return
      fi
    fi
    set +C
    if [ -n "$gw_pe" ] && ! gw_penv; then
      mv -f ` + startLock + ` "` + startLockFail + `" 2>/dev/null; eval "gw_v$1=noenv"; return
    fi
    if [ -n "$gw_par" ]; then
      { ( set --; eval "$gw_s" ) </dev/null >>` + startLock + ` 2>` + startErr + `; printf '\n` + statusLine + `%s\n' "$?" >>` + startLock + `; } >/dev/null 2>&1 &
      eval "gw_p$1=\$!"
    else
      ( set --; eval "$gw_s" ) </dev/null >>` + startLock + ` 2>` + startErr + `
      printf '\n` + statusLine + `%s\n' "$?" >>` + startLock + `
    fi
    eval "gw_v$1=ran"
  else
    set +C
    eval "gw_v$1=held"
  fi
}
gw_wait() {
  eval "gw_p=\$gw_p$1"
  [ -z "$gw_p" ] || wait "$gw_p"
}
gw_penv() {
  set -C
  { printf '%s' "$gw_pe" >` + propertyFileNew + `; } 2>/dev/null ||
    { rm -f ` + propertyFileNew + ` && { printf '%s' "$gw_pe" >` + propertyFileNew + `; } 2>/dev/null; } || { set +C; return 1; }
  set +C
  mv -f ` + propertyFileNew + ` ` + envfile.PropertyFile + `
}
gw_ran() {
  [ -n "$gw_ls" ] || return 1
  for gw_f in ` + startLock + `.abandoned-*; do [ -e "$gw_f" ] && break; return 1; done
  gw_lo=$(GW_PATH=$GW_WORKDIR/` + events.ControlDir + `; export GW_PATH; set --; eval "$gw_ls" 2>/dev/null) || return 1
  case "
$gw_lo
" in *"
` + path.Base(events.StdoutFile) + `
"* | *"
` + path.Base(events.ExitFile) + `
"*) return 0 ;; esac
  return 1
}
gw_report() {
  gw_k=$1
  eval "gw_v=\$gw_v$1"
  case $gw_v in
  nodir) gw_say "err cannot enter the working directory"; return ;;
  nojob) gw_say "err cannot write the JOB script"; return ;;
  noenv) gw_say "err cannot write the property API's file"; return ;;
  esac
  cd "$2" 2>/dev/null || { gw_say "err cannot enter the working directory"; return; }
  if gw_scan ` + startLock + `; then
    [ "$gw_v" = ran ] || gw_v=done
  elif [ "$gw_v" = held ] && [ -s ` + startRC + ` ] && read -r gw_r <` + startRC + `; then
    gw_scan ` + startOut + `; gw_rc=$gw_r gw_v=done
    printf '%s` + statusLine + `%s\n' "$gw_o" "$gw_rc" >>` + startLock + ` && rm -f ` + startRC + `
  elif [ "$gw_v" = ran ]; then
    gw_say "err START's exit status could not be recorded"; return
  elif [ ! -e ` + startLock + ` ]; then
    gw_say "err cannot create the start lock"; return
  elif [ -n "$(find ` + startLock + ` -mmin "+$gw_stale" 2>/dev/null)" ]; then
    mv -f ` + startLock + ` "` + startLockStale + `" 2>/dev/null; gw_say stale; return
  else
    gw_say busy; return
  fi
  gw_say "$gw_v $gw_rc"
  printf '%s' "$gw_o"
  gw_say stderr
  [ ! -s ` + startErr + ` ] || gw_cat ` + startErr + `
  gw_say end
  [ "$gw_rc" = 0 ] || { mv -f ` + startLock + ` "` + startLockFail + `" 2>/dev/null; gw_say released; }
}
`

// errStartedBefore is START's error output when an attempt that takes over an abandoned
// start lock finds, with the profile's LIST template, that the job already ran: the
// abandoned attempt's START started it and died before its native ID was recorded.
const errStartedBefore = "an earlier attempt's START ran this job (LIST of its control directory shows the files its JOB script writes when it runs) and died before the native ID was recorded; gridwire does not start a job twice"

// parseStart splits the start script's output into the verdicts of its n jobs. A job
// whose verdict is missing (the script died before its turn, or while reporting it) has
// none: ok[k] is false.
func parseStart(nonce string, stdout []byte, n int) (verdicts []startVerdict, ok []bool) {
	r := newStartReader(nonce, n, nil, nil)
	r.Write(stdout)
	r.Close()
	return r.verdicts, r.ok
}

// startReader reads a start script's output as the script prints it, and hands each job
// its verdict (done(k)) as soon as the script has printed it whole: a batch's caller
// goes on with its job while the script still starts or reports others. It is an
// io.Writer for the shell's standard output. launched is called once, when the script
// says every START of its batch is under way (launchedMark), or at Close.
type startReader struct {
	marker   []byte
	verdicts []startVerdict
	ok       []bool
	done     func(k int) // nil: none
	launched func()      // nil: none

	mu       sync.Mutex
	told     []bool  // done(k) was called
	sink     *[]byte // where the lines that follow go (START's output or error output)
	line     []byte  // a line not yet ended
	launches bool    // launched was called
	closed   bool
}

// launchedMark is the start script's line, after its marker, that says every START of
// the script is under way (a batch target's, in the background): what is left is
// reporting.
const launchedMark = "all:launched"

func newStartReader(nonce string, n int, done func(k int), launched func()) *startReader {
	return &startReader{marker: []byte("gw:" + nonce + ":"), verdicts: make([]startVerdict, n), ok: make([]bool, n),
		told: make([]bool, n), done: done, launched: launched}
}

// Write takes the next bytes of the script's output. After Close it drops them: a shell
// over SSH whose caller has gone may still be writing.
func (r *startReader) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return len(p), nil
	}
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			r.line = append(r.line, p...)
			break
		}
		if len(r.line) > 0 {
			r.line = append(r.line, p[:i]...)
			r.take(r.line)
			r.line = r.line[:0]
		} else {
			r.take(p[:i])
		}
		p = p[i+1:]
	}
	return n, nil
}

// Close ends the output: a last line without its newline counts, and nothing written
// later does. The verdicts are then final.
func (r *startReader) Close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	if len(r.line) > 0 {
		r.take(r.line)
	}
	r.closed = true
	for k := range r.ok {
		r.tell(k) // a failed START whose lock the script did not get to release
	}
	r.launch()
}

func (r *startReader) launch() {
	if !r.launches && r.launched != nil {
		r.launched()
	}
	r.launches = true
}

// take reads one line of the script's output.
func (r *startReader) take(line []byte) {
	if !bytes.HasPrefix(line, r.marker) {
		if r.sink != nil {
			*r.sink = append(append(*r.sink, line...), '\n')
		}
		return
	}
	rest := string(line[len(r.marker):])
	if rest == launchedMark {
		r.launch()
		return
	}
	idx, what, _ := strings.Cut(rest, ":")
	k, err := strconv.Atoi(idx)
	if err != nil || k < 0 || k >= len(r.verdicts) {
		r.sink = nil
		return
	}
	r.sink = nil
	cur := &r.verdicts[k]
	verdict, arg, _ := strings.Cut(what, " ")
	switch verdict {
	case "busy", "stale":
		*cur, r.ok[k] = startVerdict{verdict: verdict}, true
		r.tell(k)
	case "err":
		*cur, r.ok[k] = startVerdict{verdict: verdict, reason: arg}, true
		r.tell(k)
	case "ran", "done":
		rc, err := strconv.Atoi(arg)
		if err != nil {
			*cur, r.ok[k] = startVerdict{verdict: "err", reason: fmt.Sprintf("START's recorded exit status %q", arg)}, true
			r.tell(k)
			return
		}
		*cur = startVerdict{verdict: verdict, rc: rc}
		r.sink = &cur.out
	case "stderr":
		r.sink = &cur.errOut
	case "end":
		r.ok[k], r.sink = cur.verdict == "ran" || cur.verdict == "done", nil
		if cur.rc == 0 {
			r.tell(k)
		}
	case "released":
		r.tell(k)
	}
}

// tell hands job k its verdict, once: what the script prints of the job later (it
// prints nothing more) cannot change it.
func (r *startReader) tell(k int) {
	if r.told[k] || !r.ok[k] {
		return
	}
	r.told[k] = true
	if r.done != nil {
		r.done(k)
	}
}
