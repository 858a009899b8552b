// Package ptptest is a PTP resource-manager client for tests and benchmarks, in either
// wire form. It keeps the model the events describe and holds the endpoint to the rules
// Eclipse PTP 5's own client enforces: an event whose transaction ID matches no command
// still waiting is an error (PTP's client stops there), commands are retired as PTP
// retires them, and job and process states must be STARTING, RUNNING, SUSPENDED or
// COMPLETED. In the binary form it compresses commands over 100 bytes with PTP's
// default Huffman table, as PTP's client does.
package ptptest

import (
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/gridwire/gridwire/pkg/ptpwire"
	"github.com/gridwire/gridwire/pkg/rangeset"
)

// Job is one job element as the client sees it.
type Job struct {
	ID, Queue string
	Attrs     map[string]string
	// States lists every jobStatus value the job was given, in order of arrival.
	States []string
	Procs  rangeset.Set
	Proc   map[string]string // the processes' shared attributes, last seen
}

// Client is one session.
type Client struct {
	conn   io.ReadWriteCloser
	format ptpwire.Format
	enc    *ptpwire.Encoder
	dec    *ptpwire.Decoder

	mu       sync.Mutex
	cond     *sync.Cond
	nextTID  uint32
	pending  map[uint32]ptpwire.Command
	replies  map[uint32][]ptpwire.Message
	err      error
	Machines map[string]map[string]string
	Nodes    map[string]map[string]string
	Queues   map[string]map[string]string
	Jobs     map[string]*Job
	BySubID  map[string]string // jobSubId → job element ID
	AttrDefs map[string]bool
	Events   int
	// Completed counts jobs whose jobState is COMPLETED.
	Completed int
	// Transcript, when Record is set before the first command, keeps every message in
	// both directions ("> " commands, "< " events) for golden files.
	Record     bool
	Transcript []string
}

// Dial connects to an endpoint and starts reading. token, if not empty, is sent on the
// token line first.
func Dial(addr string, f ptpwire.Format, token string) (*Client, error) {
	conn, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		return nil, err
	}
	if token != "" {
		if _, err := io.WriteString(conn, "GRIDWIRE-TOKEN "+token+"\n"); err != nil {
			return nil, err
		}
	}
	return New(conn, f), nil
}

// New starts a session over conn.
func New(conn io.ReadWriteCloser, f ptpwire.Format) *Client {
	c := &Client{conn: conn, format: f, enc: ptpwire.NewEncoder(conn, f), dec: ptpwire.NewDecoder(conn),
		pending: map[uint32]ptpwire.Command{}, replies: map[uint32][]ptpwire.Message{},
		Machines: map[string]map[string]string{}, Nodes: map[string]map[string]string{},
		Queues: map[string]map[string]string{}, Jobs: map[string]*Job{}, BySubID: map[string]string{},
		AttrDefs: map[string]bool{}, nextTID: 1}
	c.cond = sync.NewCond(&c.mu)
	if f == ptpwire.FormatBinary {
		_ = c.enc.Compress()
	}
	go c.read()
	return c
}

// Close ends the connection.
func (c *Client) Close() error { return c.conn.Close() }

// Err is the first rule the endpoint broke, or the read error that ended the session.
func (c *Client) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

func (c *Client) fail(err error) {
	if c.err == nil {
		c.err = err
	}
	c.cond.Broadcast()
}

// Send sends a command and returns its transaction ID.
func (c *Client) Send(cmd ptpwire.Command, args ...string) (uint32, error) {
	id, ok := ptpwire.CommandID(c.format, cmd)
	if !ok {
		return 0, fmt.Errorf("ptptest: %v has no number in the %v form", cmd, c.format)
	}
	return c.SendRaw(id, cmd, args...)
}

// SendRaw sends a command by number (to test unknown ones); cmd says how to retire it.
func (c *Client) SendRaw(id int, cmd ptpwire.Command, args ...string) (uint32, error) {
	c.mu.Lock()
	tid := c.nextTID
	c.nextTID++
	c.pending[tid] = cmd
	m := ptpwire.Message{ID: id, TID: tid, Args: args}
	if c.Record {
		c.Transcript = append(c.Transcript, "> "+describe(m, true))
	}
	err := c.enc.Encode(m)
	c.mu.Unlock()
	return tid, err
}

func describe(m ptpwire.Message, command bool) string {
	name := ptpwire.EventName(m.ID)
	if command {
		name = "CMD " + strconv.Itoa(m.ID)
	}
	return fmt.Sprintf("%s tid=%d %q", name, m.TID, m.Args)
}

func (c *Client) read() {
	for {
		m, err := c.dec.Decode()
		c.mu.Lock()
		if err != nil {
			c.fail(fmt.Errorf("ptptest: reading: %w", err))
			c.mu.Unlock()
			return
		}
		c.Events++
		if c.Record {
			c.Transcript = append(c.Transcript, "< "+describe(m, false))
		}
		if err := c.apply(m); err != nil {
			c.fail(err)
		}
		c.cond.Broadcast()
		c.mu.Unlock()
	}
}

// apply routes an event as PTP 5's client does, then folds it into the model.
func (c *Client) apply(m ptpwire.Message) error {
	cmd, ok := c.pending[m.TID]
	if !ok {
		return fmt.Errorf("ptptest: event %s with transaction %d, which matches no command waiting (PTP's client stops here)", ptpwire.EventName(m.ID), m.TID)
	}
	c.replies[m.TID] = append(c.replies[m.TID], m)
	switch {
	case m.ID == ptpwire.EvOK || m.ID == ptpwire.EvError || m.ID == ptpwire.EvShutdown:
		delete(c.pending, m.TID)
	case cmd == ptpwire.CmdSubmitJob || cmd == ptpwire.CmdTerminateJob || cmd == ptpwire.CmdStopEvents:
		delete(c.pending, m.TID) // PTP retires these on their first event
	}
	if cmd == ptpwire.CmdStartEvents && m.ID != ptpwire.EvOK && m.ID != ptpwire.EvError && m.ID != ptpwire.EvMessage {
		return c.model(m)
	}
	if m.ID == ptpwire.EvAttrDef && len(m.Args) >= 3 {
		c.AttrDefs[m.Args[2]] = true
	}
	return nil
}

// Wait blocks until cond holds (checked under the client's lock) or the session fails.
func (c *Client) Wait(timeout time.Duration, what string, cond func(c *Client) bool) error {
	deadline := time.Now().Add(timeout)
	t := time.AfterFunc(timeout, func() { c.mu.Lock(); c.cond.Broadcast(); c.mu.Unlock() })
	defer t.Stop()
	c.mu.Lock()
	defer c.mu.Unlock()
	for !cond(c) {
		if c.err != nil {
			return fmt.Errorf("waiting for %s: %w", what, c.err)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("ptptest: %s did not happen within %v", what, timeout)
		}
		c.cond.Wait()
	}
	return nil
}

// Call sends a command and waits for its last reply: OK, ERROR, SHUTDOWN, or the first
// event of a command PTP retires on its first event. It returns every event it got.
func (c *Client) Call(timeout time.Duration, cmd ptpwire.Command, args ...string) ([]ptpwire.Message, error) {
	tid, err := c.Send(cmd, args...)
	if err != nil {
		return nil, err
	}
	err = c.Wait(timeout, cmd.String(), func(c *Client) bool { _, waiting := c.pending[tid]; return !waiting })
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.replies[tid], err
}

// ErrRefused is returned by Must when a command's reply is not OK.
var ErrRefused = errors.New("ptptest: command refused")

// Must is Call expecting OK (or SHUTDOWN for QUIT) as the last reply.
func (c *Client) Must(timeout time.Duration, cmd ptpwire.Command, args ...string) ([]ptpwire.Message, error) {
	r, err := c.Call(timeout, cmd, args...)
	if err != nil {
		return r, err
	}
	last := r[len(r)-1]
	if last.ID != ptpwire.EvOK && last.ID != ptpwire.EvShutdown {
		return r, fmt.Errorf("%w: %v answered %s %q", ErrRefused, cmd, ptpwire.EventName(last.ID), last.Args)
	}
	return r, nil
}

// Handshake is INIT (version 2.0 and baseId in PTP 5's form, positional in the
// document's) and MODEL_DEF, then START_EVENTS without waiting.
func (c *Client) Handshake(timeout time.Duration, base uint32) error {
	args := []string{"version=2.0", "baseId=" + strconv.FormatUint(uint64(base), 10)}
	if c.format == ptpwire.FormatText {
		args = []string{"4.0", strconv.FormatUint(uint64(base), 10)}
	}
	if _, err := c.Must(timeout, ptpwire.CmdInit, args...); err != nil {
		return err
	}
	if _, err := c.Must(timeout, ptpwire.CmdModelDef); err != nil {
		return err
	}
	_, err := c.Send(ptpwire.CmdStartEvents)
	return err
}

// Job returns a copy of the job with the given submission ID, if it has arrived.
func (c *Client) Job(subID string) (Job, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	j, ok := c.Jobs[c.BySubID[subID]]
	if !ok {
		return Job{}, false
	}
	return copyJob(j), true
}

// JobByID returns a copy of a job element.
func (c *Client) JobByID(id string) (Job, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	j, ok := c.Jobs[id]
	if !ok {
		return Job{}, false
	}
	return copyJob(j), true
}

func copyJob(j *Job) Job {
	out := *j
	out.Attrs = clone(j.Attrs)
	out.Proc = clone(j.Proc)
	out.States = append([]string(nil), j.States...)
	return out
}

func clone(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// Snapshot runs f under the client's lock.
func (c *Client) Snapshot(f func(c *Client)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f(c)
}
