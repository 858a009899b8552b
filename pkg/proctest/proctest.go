// Package proctest ends the processes a test's jobs leave behind: a job started under
// a test's scratch directory (by a fork cluster or over a test sshd) keeps running when
// the test fails or ends before it, as the login user, for the rest of the machine's life.
package proctest

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// KillSessionsNaming ends what a test's jobs left running: every process
// in the session of a process whose command line names dir or that works in it (a job
// script under the test's scratch directory, and the sleeps it started, still there
// when the script itself has ended). A test that fails half-way
// would otherwise leave its held or gated jobs running as the login user for good.
// Sessions are the test's own: sshd starts each login in a session of its own, and the
// fork executor's jobs call setsid; the test process's own session is never touched.
func KillSessionsNaming(dir string) {
	own := SessionOf(os.Getpid())
	entries, _ := os.ReadDir("/proc")
	sessions := map[int]bool{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		cwd, _ := os.Readlink(filepath.Join("/proc", e.Name(), "cwd"))
		if !strings.Contains(string(cmdline), dir) && cwd != dir && !strings.HasPrefix(cwd, dir+"/") {
			continue
		}
		if sid := SessionOf(pid); sid > 1 && sid != own {
			sessions[sid] = true
		}
	}
	if len(sessions) == 0 {
		return
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if sessions[SessionOf(pid)] {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// SessionOf reads a process's session ID from /proc/PID/stat (0 when it is gone).
func SessionOf(pid int) int {
	st, ok := statOf(strconv.Itoa(pid))
	if !ok {
		return 0
	}
	return st.session
}

// procStat is what the tests read of a process's /proc/PID/stat.
type procStat struct {
	state          string
	group, session int
}

// statOf reads /proc/PID/stat; false when the process is gone.
func statOf(pid string) (procStat, bool) {
	b, err := os.ReadFile(filepath.Join("/proc", pid, "stat"))
	if err != nil {
		return procStat{}, false
	}
	// After the command name in parentheses: state, ppid, pgrp, session.
	fields := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	if len(fields) < 4 {
		return procStat{}, false
	}
	pgrp, _ := strconv.Atoi(fields[2])
	sid, _ := strconv.Atoi(fields[3])
	return procStat{state: fields[0], group: pgrp, session: sid}, true
}

// GroupRuns reports whether a process that has not ended (a zombie has) is in the
// process group pgid, read from /proc.
func GroupRuns(pgid int) bool {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue // self, thread-self and the rest are not processes of their own
		}
		if st, ok := statOf(e.Name()); ok && st.state != "Z" && st.group == pgid {
			return true
		}
	}
	return false
}

// GroupEnds waits up to within for no process of the group pgid to run, and reports
// whether none does.
func GroupEnds(pgid int, within time.Duration) bool {
	for deadline := time.Now().Add(within); GroupRuns(pgid); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			return false
		}
	}
	return true
}
