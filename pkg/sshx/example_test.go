package sshx_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/gridwire/gridwire/pkg/shellquote"
	"github.com/gridwire/gridwire/pkg/sshx"
)

// A service builds one Pool per (user, identity, known_hosts) and asks it for the host's
// connection for every unit of work.
func Example() {
	pool, err := sshx.NewPool(sshx.Config{
		User:           "gridwire",
		IdentityFiles:  []string{"/etc/gridwire/id_ed25519"},
		KnownHostsFile: "/etc/gridwire/known_hosts",
		KeepAlive:      15 * time.Second,
	}, slog.Default())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return
	}
	defer pool.Close()

	ctx := context.Background()
	c, err := pool.Client(ctx, "login.hpc1.example:22")
	var hostKey *sshx.HostKeyError
	switch {
	case errors.As(err, &hostKey):
		// Unknown, changed or revoked: refuse, and say which key the host presented.
		fmt.Fprintln(os.Stderr, hostKey.Reason, hostKey.Fingerprint)
		return
	case err != nil:
		return
	}
	workDir := "/scratch/jobs/01J0000000000000000000000"
	if err := c.MkdirAll(ctx, workDir+"/.gridwire"); err != nil {
		return
	}
	script, _ := os.Open("job.sh")
	defer script.Close()
	if _, err := c.Upload(ctx, script, workDir+"/.gridwire/job.sh", 0o700); err != nil {
		return
	}
	res, err := c.Run(ctx, "cd "+shellquote.Quote(workDir)+" && sh .gridwire/job.sh", nil)
	switch {
	case errors.Is(err, sshx.ErrNotStarted):
		// Safe to retry: the command never ran.
	case err != nil:
		// Transport failure after the start: look on the host before running it again.
	default:
		fmt.Println(res.ExitCode, c.HostKeyFingerprint())
	}
}
