package incarnator

import (
	"fmt"
	"strconv"
	"time"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/pkg/shellquote"
)

// The JOB script enforces a job's times itself, so they hold on every target kind: a fork
// or SSH host has no scheduler to ask, and on a batch target the LRMS's own options
// (sbatch --begin/--time, qsub -a/-l walltime) round to minutes and end a job without
// saying why. The target's clock decides, read with date +%s.
//
//   - StartBefore: a job that starts after it ends at once, exit code
//     exitNotStarted, its reason in the exit status line.
//   - StartTime: the program waits until then.
//   - Duration: a watchdog ends a program still running after it (TERM, then KILL
//     after killGrace) and the exit status line says so.
//
// The reason reaches the watcher as the rest of the exit status line, after the code
// (GW_REASON, written by JOB_EPILOGUE).
const (
	exitNotStarted = 125
	// exitLimitRefused ends a run whose resource limit the target would not set.
	exitLimitRefused = 124
	killGrace        = 10 * time.Second
	overrunMarker    = events.ControlDir + "/overrun"
)

// appendLimits sets the job's resource limits in the program's subshell, one ulimit each
// (a builtin of every POSIX shell: nothing is started for them), so the program and all
// it starts run under them on any target. A size is rounded down to the option's unit,
// never looser than asked. A limit the target refuses (above its hard limit) ends the run
// with exitLimitRefused before the program starts, saying which on standard error.
func appendLimits(b []byte, job *events.Job) ([]byte, error) {
	for i, l := range job.Limits {
		opt, unit, ok := l.Resource.Ulimit()
		switch {
		case !ok:
			return nil, fmt.Errorf("limits[%d]: %q is not a resource limit the JOB script sets (cpu_time, file_size, core_size, data_size, locked_memory, open_files, stack_size, virtual_memory)", i, l.Resource)
		case l.Value < 0:
			return nil, fmt.Errorf("limits[%d]: %s %d is negative", i, l.Resource, l.Value)
		}
		set := "ulimit " + opt + " " + strconv.FormatInt(l.Value/unit, 10)
		why := "gridwire: the target refused the job's " + string(l.Resource) + " limit (" + set + ")"
		b = append(b, set+" || { echo "+shellquote.Quote(why)+" >&2; exit "+strconv.Itoa(exitLimitRefused)+"; }\n"...)
	}
	return b, nil
}

// startGate opens the deadline check: when the job has a start-before it is followed by
// the program and closed with "fi" (endGate).
func startGate(b []byte, job *events.Job) []byte {
	b = append(b, "GW_REASON=\n"...)
	if job.StartBefore != nil {
		d := job.StartBefore.UTC()
		why := "jobStartBefore: the job had not started by " + d.Format(time.RFC3339) + ", so it was not run"
		b = append(b, `if [ "$(date +%s)" -gt `+strconv.FormatInt(d.Unix(), 10)+" ]; then\n"...)
		b = append(b, "GW_EXIT="+strconv.Itoa(exitNotStarted)+"\nGW_REASON="+shellquote.Quote(why)+"\nelse\n"...)
	}
	if job.StartTime != nil {
		s := strconv.FormatInt(job.StartTime.Unix(), 10)
		b = append(b, "# jobStartTime "+job.StartTime.UTC().Format(time.RFC3339)+"\n"...)
		b = append(b, `gw_now=$(date +%s); if [ "$gw_now" -lt `+s+" ]; then sleep $(("+s+" - gw_now)); fi\n"...)
	}
	return b
}

func endGate(b []byte, job *events.Job) []byte {
	if job.StartBefore != nil {
		b = append(b, "fi\n"...)
	}
	return b
}

// runLimited ends the program line (started with "(" by the caller) in the background
// under a watchdog when the job has a duration, else in the foreground; either way
// GW_EXIT holds its exit code afterwards.
func runLimited(b []byte, job *events.Job, redirect string) []byte {
	limit := durationSeconds(job)
	if limit <= 0 {
		return append(b, "\n) "+redirect+"\nGW_EXIT=$?\n"...)
	}
	n, grace := strconv.FormatInt(limit, 10), strconv.FormatInt(int64(killGrace/time.Second), 10)
	marker := `"$` + events.VarWorkDir + `"/` + overrunMarker
	why := durationLabel(job) + ": still running after " + n + " s, so it was ended"
	b = append(b, "\n) "+redirect+" &\ngw_pid=$!\n"...)
	b = append(b, treeFunc...)
	// The watchdog waits on its sleep, so a TERM (the job ended first) ends it at once.
	// It signals the program's whole process tree, listed before the TERM: the program
	// runs in a subshell, and a TERM to the subshell alone left the program running,
	// orphaned, after the job was reported ended.
	b = append(b, "(\ntrap 'kill $gw_s 2>/dev/null; exit 0' TERM\n"+
		"sleep "+n+" & gw_s=$!; wait $gw_s\n"+
		": >"+marker+"\ngw_t=$(gw_tree $gw_pid)\nkill -TERM $gw_pid $gw_t 2>/dev/null\n"+
		"sleep "+grace+" & gw_s=$!; wait $gw_s\nkill -KILL $gw_pid $gw_t $(gw_tree $gw_pid) 2>/dev/null\n"+
		") </dev/null >/dev/null 2>&1 &\ngw_dog=$!\n"+
		"wait $gw_pid\nGW_EXIT=$?\nkill -TERM $gw_dog 2>/dev/null\n"+
		"if [ -e "+marker+" ]; then GW_REASON="+shellquote.Quote(why)+"; fi\n"...)
	return b
}

// treeFunc defines gw_tree PID, which prints every descendant of PID, read from
// POSIX ps and awk (nothing when ps is missing: then only PID itself is signalled).
const treeFunc = `gw_tree() {
ps -A -o pid= -o ppid= 2>/dev/null | awk -v root="$1" '{ parent[$1] = $2 }
END { tree[root] = 1; do { more = 0; for (p in parent) if (!(p in tree) && (parent[p] in tree)) { tree[p] = 1; more = 1 } } while (more)
for (p in tree) if (p != root) print p }'
}
`

// durationSeconds is the job's wall time limit in whole seconds, rounded up; 0 for none.
func durationSeconds(job *events.Job) int64 {
	if job.Duration <= 0 {
		return 0
	}
	return int64((job.Duration + time.Second - 1) / time.Second)
}

// durationLabel names the limit as the description wrote it (a wall time given as
// jobDuration) or else by its length.
func durationLabel(job *events.Job) string {
	if job.Walltime != nil {
		return "jobDuration " + job.Walltime.String()
	}
	return "the duration limit " + job.Duration.String()
}
