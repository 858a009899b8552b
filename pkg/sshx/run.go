package sshx

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"golang.org/x/crypto/ssh"
)

// ErrNotStarted marks a Run whose command certainly did not start on the host (no
// session, or the exec request refused): retrying it cannot run it twice. A Run that
// fails with ErrConnectionLost and without ErrNotStarted may have run, in part or whole.
var ErrNotStarted = errors.New("sshx: command not started")

// Result is what a remote command produced.
type Result struct {
	Stdout, Stderr []byte
	// ExitCode is the command's exit status; 128+n when signal n killed it.
	ExitCode int
	// Signal names the signal that killed the command ("KILL", "TERM"), if one did.
	Signal string
}

// Run runs script on the host as one command of the remote user's login shell (sshd
// runs it as `$SHELL -c script`), feeding it stdin (nil: empty), and returns its output
// and exit status. A non-zero exit is a Result, not an error; errors are transport
// failures, ErrNotStarted when the command never ran, and ctx's error when ctx ended
// first, in which case the command is sent SIGKILL, its session closed and its output
// dropped. Run returns once the command has exited; a stdin reader still blocked then is
// abandoned.
func (c *Client) Run(ctx context.Context, script string, stdin io.Reader) (Result, error) {
	var stdout bytes.Buffer
	res, waited, err := c.run(ctx, script, stdin, &stdout)
	if waited { // else the session's reader may still be writing to stdout
		res.Stdout = stdout.Bytes()
	}
	return res, err
}

// RunTo is Run with the command's standard output written to stdout as it comes
// instead of kept in the Result (whose Stdout is then nil), so a caller can act on the
// first lines of a long command. Every write to stdout has happened when RunTo returns,
// except when ctx ended first: the session's reader may then still write what was on
// its way, so stdout must be safe to write after RunTo has returned.
func (c *Client) RunTo(ctx context.Context, script string, stdin io.Reader, stdout io.Writer) (Result, error) {
	res, _, err := c.run(ctx, script, stdin, stdout)
	return res, err
}

// run is RunTo, and reports whether the command's end was waited for (every write to
// stdout done).
func (c *Client) run(ctx context.Context, script string, stdin io.Reader, stdout io.Writer) (Result, bool, error) {
	sess, release, err := c.session(ctx)
	if err != nil {
		return Result{}, false, err
	}
	var stderr bytes.Buffer
	sess.Stdout, sess.Stderr = stdout, &stderr
	var stdinPipe io.WriteCloser
	if stdin != nil {
		if stdinPipe, err = sess.StdinPipe(); err != nil {
			sess.Close()
			release()
			return Result{}, false, fmt.Errorf("%w on %s: %w", ErrNotStarted, c.host, err)
		}
	}
	if err := sess.Start(script); err != nil {
		sess.Close()
		release()
		return Result{}, false, c.startError(err)
	}
	if stdinPipe != nil {
		go func() {
			io.Copy(stdinPipe, stdin)
			stdinPipe.Close()
		}()
	}
	waited := make(chan error, 1)
	go func() {
		waited <- sess.Wait()
		sess.Close()
		release() // only once the session is over, so the server's limit holds
	}()
	select {
	case err = <-waited:
	case <-ctx.Done():
		// Kill the command and close the session without waiting for the server to
		// confirm: a peer gone silent must not hold the caller. Partial output is dropped
		// (the session's goroutines may still be writing it).
		sess.Signal(ssh.SIGKILL)
		sess.Close()
		return Result{}, false, fmt.Errorf("sshx: running on %s: %w", c.host, ctx.Err())
	}
	res, err := c.exitResult(Result{Stderr: stderr.Bytes()}, err)
	return res, true, err
}

func (c *Client) exitResult(res Result, err error) (Result, error) {
	var exit *ssh.ExitError
	switch {
	case err == nil:
		return res, nil
	case errors.As(err, &exit):
		res.ExitCode, res.Signal = exit.ExitStatus(), exit.Signal()
		return res, nil
	default:
		if lost := c.lostErr(err); lost != nil {
			err = lost
		}
		return res, fmt.Errorf("sshx: running on %s: %w", c.host, err)
	}
}

// startError classifies a failed exec request. On a live connection the server refused
// it: the command did not start. On a lost one the request may have been carried out
// with only the answer lost (sshd starts the command before it replies), so the error
// says the connection was lost and not that the command did not start.
func (c *Client) startError(err error) error {
	if lost := c.lostErr(err); lost != nil {
		return fmt.Errorf("sshx: running on %s: %w", c.host, lost)
	}
	return fmt.Errorf("%w on %s: %w", ErrNotStarted, c.host, err)
}

func (c *Client) notStarted(err error) error {
	if lost := c.lostErr(err); lost != nil {
		err = lost
	}
	return fmt.Errorf("%w on %s: %w", ErrNotStarted, c.host, err)
}

// session takes a session slot and opens a session. Servers refuse sessions beyond
// their limit (OpenSSH: "connect failed: open failed"; others: "administratively
// prohibited" or "resource shortage"), and OpenSSH frees a slot a little after the client
// saw the session end, so refusals are retried with backoff (about 1.3 s in all): a
// refused open never started anything.
func (c *Client) session(ctx context.Context) (*ssh.Session, func(), error) {
	release, err := c.acquire(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("%w on %s: %w", ErrNotStarted, c.host, err)
	}
	for attempt := 0; ; attempt++ {
		sess, err := c.conn.NewSession()
		if err == nil {
			return sess, release, nil
		}
		var refused *ssh.OpenChannelError
		retry := errors.As(err, &refused) && attempt < 8 && refused.Reason != ssh.UnknownChannelType
		if !retry {
			release()
			return nil, nil, c.notStarted(err)
		}
		if err := sleep(ctx, time.Duration(5<<attempt)*time.Millisecond); err != nil {
			release()
			return nil, nil, fmt.Errorf("%w on %s: %w", ErrNotStarted, c.host, err)
		}
	}
}

// acquire takes one of the connection's session slots.
func (c *Client) acquire(ctx context.Context) (func(), error) {
	if err := ctx.Err(); err != nil { // select would pick a free slot half the time
		return nil, err
	}
	select {
	case c.sessions <- struct{}{}:
		return func() { <-c.sessions }, nil
	case <-c.done:
		return nil, c.Err()
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting for a session: %w", ctx.Err())
	}
}
