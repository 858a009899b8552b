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
)

// KillSessionsNaming ends what a test's jobs left running: every process
// in the session of a process whose command line names dir (a job script under the
// test's scratch directory, and the sleeps it started). A test that fails half-way
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
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !strings.Contains(string(cmdline), dir) {
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
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0
	}
	// After the command name in parentheses: state, ppid, pgrp, session.
	fields := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	if len(fields) < 4 {
		return 0
	}
	sid, _ := strconv.Atoi(fields[3])
	return sid
}
