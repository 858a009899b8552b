package ptp

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/pkg/httpapi"
	"github.com/gridwire/gridwire/pkg/ptpwire"
)

// Error codes of ERROR, SUBMITJOB_ERROR and TERMINATEJOB_ERROR events.
const (
	CodeProtocol       = 1 // malformed command, or a command out of phase
	CodeNotImplemented = 2 // a command gridwire does not carry out
	CodeSubmit         = 3 // ingest refused or could not take the job
	CodeNoJob          = 4 // the element is not a job of this model
	CodeControl        = 5 // the control owner refused or could not take the request
	CodePermission     = 6 // the session's token does not allow it
)

// WireVersion is the INIT version PTP 5's client sends (IProxyClient.WIRE_PROTOCOL_VERSION).
const WireVersion = "2.0"

// writeTimeout bounds one flush to a client that stopped reading.
const writeTimeout = time.Minute

// batch is how many changes a session takes from the model at a time.
const batch = 1024

type incoming struct {
	msg ptpwire.Message
	err error
}

type session struct {
	svc    *Service
	dec    *ptpwire.Decoder
	w      *bufio.Writer
	enc    *ptpwire.Encoder
	conn   io.ReadWriteCloser
	remote string
	grant  httpapi.Grant

	inited, defined bool
	base            uint32
	streaming       bool // START_EVENTS given and not stopped
	suspended       bool // SUSPEND_EVENTS (PTP 5's flow control)
	snapshotSent    bool
	startTID        uint32
	cursor          uint64
	announced       map[string]bool
	subIDs          map[string]string // job ID → jobSubId of this session's submissions
	quit            bool
}

func newSession(s *Service, r *bufio.Reader, conn io.ReadWriteCloser, remote string, g httpapi.Grant) *session {
	dec := ptpwire.NewDecoder(r)
	dec.SetMaxFrame(s.cfg.MaxFrame)
	w := bufio.NewWriterSize(conn, 64<<10)
	return &session{svc: s, dec: dec, w: w, conn: conn, remote: remote, grant: g,
		announced: map[string]bool{}, subIDs: map[string]string{}}
}

func (s *session) format() ptpwire.Format { return s.dec.Format() }

func (s *session) send(m ptpwire.Message) error {
	if s.enc == nil {
		s.enc = ptpwire.NewEncoder(s.w, s.format())
	}
	return s.enc.Encode(m)
}

func (s *session) flush() error {
	if nc, ok := s.conn.(net.Conn); ok {
		_ = nc.SetWriteDeadline(time.Now().Add(writeTimeout))
	}
	return s.w.Flush()
}

// run reads commands in one goroutine and does everything else in this one, so replies
// and model events leave in one order.
func (s *session) run(ctx context.Context) error {
	in := make(chan incoming, 16)
	readCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	go s.read(readCtx, in)
	closed := make(chan struct{})
	close(closed)
	for {
		var wake <-chan struct{}
		if s.streaming && !s.suspended {
			w, more, err := s.pump()
			if err != nil {
				return err
			}
			wake = w
			if more {
				wake = closed
			}
		}
		if err := s.flush(); err != nil {
			return fmt.Errorf("ptp: writing to %s: %w", s.remote, err)
		}
		if s.quit {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-wake:
		case c, ok := <-in:
			if !ok {
				return nil
			}
			if err := s.handle(ctx, c); err != nil {
				_ = s.flush()
				return err
			}
		}
	}
}

func (s *session) read(ctx context.Context, out chan<- incoming) {
	defer close(out)
	for {
		m, err := s.dec.Decode()
		select {
		case out <- incoming{m, err}:
		case <-ctx.Done():
			return
		}
		var fe *ptpwire.FrameError
		if err != nil && !(errors.As(err, &fe) && fe.Resync) {
			return
		}
	}
}

// handle answers one decoded command, or one frame that did not decode: an ERROR event
// when its transaction is known, else the connection is closed (the stream cannot be
// trusted past a frame whose length or header is wrong).
func (s *session) handle(ctx context.Context, c incoming) error {
	if c.err != nil {
		if errors.Is(c.err, io.EOF) {
			return nil
		}
		var fe *ptpwire.FrameError
		if errors.As(c.err, &fe) && fe.Resync && fe.TIDKnown {
			return s.send(ptpwire.Error(fe.TID, CodeProtocol, fe.Error()))
		}
		if errors.As(c.err, &fe) && fe.Resync {
			s.svc.log.Info("ptp: undecodable frame without a transaction ID skipped", "remote", s.remote, "err", c.err)
			return nil
		}
		return fmt.Errorf("ptp: %s: %w", s.remote, c.err)
	}
	return s.command(ctx, c.msg)
}

func (s *session) command(ctx context.Context, m ptpwire.Message) error {
	cmd := ptpwire.CommandOf(s.format(), m.ID)
	if cmd != ptpwire.CmdQuit && cmd != ptpwire.CmdInit && cmd != ptpwire.CmdUnknown && !s.inited {
		return s.send(ptpwire.Error(m.TID, CodeProtocol, cmd.String()+" before INIT"))
	}
	switch cmd {
	case ptpwire.CmdQuit:
		s.quit = true
		return s.send(ptpwire.Shutdown(m.TID))
	case ptpwire.CmdInit:
		return s.init(m)
	case ptpwire.CmdModelDef:
		return s.modelDef(m)
	case ptpwire.CmdStartEvents:
		return s.startEvents(ctx, m)
	case ptpwire.CmdStopEvents:
		return s.stopEvents(m)
	case ptpwire.CmdSubmitJob:
		return s.submit(ctx, m)
	case ptpwire.CmdTerminateJob:
		return s.terminate(ctx, m)
	case ptpwire.CmdChangeJob:
		return s.changeJob(ctx, m)
	case ptpwire.CmdSuspendEvents, ptpwire.CmdResumeEvents:
		s.suspended = cmd == ptpwire.CmdSuspendEvents
		return s.send(ptpwire.OK(m.TID))
	case ptpwire.CmdSetFilters, ptpwire.CmdClearFilters:
		if s.format() == ptpwire.FormatBinary {
			// PTP 5's flow control filters process output (stdout, stderr), which
			// gridwire never streams: there is nothing to filter, and the client only
			// waits for the OK.
			return s.send(ptpwire.OK(m.TID))
		}
	}
	return s.send(ptpwire.Error(m.TID, codeOf(cmd), refusal(s.format(), cmd, m.ID)))
}

func codeOf(cmd ptpwire.Command) int {
	if cmd == ptpwire.CmdUnknown {
		return CodeProtocol
	}
	return CodeNotImplemented
}

// refusal says why a command is not carried out.
func refusal(f ptpwire.Format, cmd ptpwire.Command, id int) string {
	switch cmd {
	case ptpwire.CmdUnknown:
		return fmt.Sprintf("unknown command %d in the %s protocol", id, f)
	case ptpwire.CmdMoveJob:
		return "MOVE_JOB is not implemented: a gridwire job keeps the cluster and queue it was placed on"
	case ptpwire.CmdListFilters, ptpwire.CmdSetFilters:
		return cmd.String() + " is not implemented: gridwire defines no filters (MODEL_DEF sends no FILTER_DEF)"
	case ptpwire.CmdFilterEvents:
		return "FILTER_EVENTS is not implemented: gridwire sends every element of the model"
	case ptpwire.CmdGetAttributes, ptpwire.CmdQueryAttributes:
		return cmd.String() + " is not implemented: every attribute arrives with the NEW and CHANGE events"
	}
	return cmd.String() + " is not implemented"
}

// argValue finds "key=value" among args; positional is the index of the value in the
// design document's keyless form (INIT's VERSION and BASE_ID), -1 if none.
func argValue(args []string, key string, positional int) (string, bool) {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, key+"="); ok {
			return v, true
		}
	}
	if positional >= 0 && positional < len(args) && !strings.Contains(args[positional], "=") {
		return args[positional], true
	}
	return "", false
}

func (s *session) init(m ptpwire.Message) error {
	if s.inited {
		return s.send(ptpwire.Error(m.TID, CodeProtocol, "INIT: the session is already initialized"))
	}
	version, _ := argValue(m.Args, "version", 0)
	if s.format() == ptpwire.FormatBinary && version != WireVersion {
		return s.send(ptpwire.Error(m.TID, CodeProtocol, fmt.Sprintf("INIT: wire protocol version %q not supported (want %s)", version, WireVersion)))
	}
	raw, ok := argValue(m.Args, "baseId", 1)
	base, err := strconv.ParseUint(raw, 10, 32)
	if !ok || err != nil || base >= 1<<30 {
		return s.send(ptpwire.Error(m.TID, CodeProtocol, fmt.Sprintf("INIT: base ID %q is not a decimal below 2^30", raw)))
	}
	s.inited, s.base = true, uint32(base)
	return s.send(ptpwire.OK(m.TID))
}

func (s *session) modelDef(m ptpwire.Message) error {
	for _, d := range attrDefs {
		if d.predefined && s.format() == ptpwire.FormatBinary {
			continue // PTP 5 defines these itself; redefining would change their types
		}
		if err := s.send(d.AttrDef.Event(m.TID)); err != nil {
			return err
		}
	}
	s.defined = true
	return s.send(ptpwire.OK(m.TID))
}

func (s *session) startEvents(ctx context.Context, m ptpwire.Message) error {
	switch {
	case !s.defined:
		return s.send(ptpwire.Error(m.TID, CodeProtocol, "START_EVENTS before MODEL_DEF"))
	case s.streaming:
		return s.send(ptpwire.Error(m.TID, CodeProtocol, "START_EVENTS: events are already on"))
	}
	s.streaming, s.startTID = true, m.TID
	if s.snapshotSent {
		return nil // events resume from where STOP_EVENTS left them
	}
	select {
	case <-s.svc.model.Ready():
	case <-ctx.Done():
		return ctx.Err()
	}
	s.snapshotSent = true
	return s.sendModel()
}

// stopEvents ends the START_EVENTS command with its OK, then answers STOP_EVENTS, as
// PTP's proxies do.
func (s *session) stopEvents(m ptpwire.Message) error {
	if !s.streaming {
		return s.send(ptpwire.Error(m.TID, CodeProtocol, "STOP_EVENTS: events are not on"))
	}
	s.streaming = false
	if err := s.send(ptpwire.OK(s.startTID)); err != nil {
		return err
	}
	return s.send(ptpwire.OK(m.TID))
}

func (s *session) submit(ctx context.Context, m ptpwire.Message) error {
	subID, ok := argValue(m.Args, "jobSubId", -1)
	if !ok {
		return s.send(ptpwire.Error(m.TID, CodeSubmit, "SUBMIT_JOB: no jobSubId attribute"))
	}
	if !s.grant.May(httpapi.PermSubmit) {
		return s.send(ptpwire.SubmitJobError(m.TID, subID, CodePermission, "the session's token may not submit"))
	}
	args, err := s.translateQueue(m.Args)
	if err != nil {
		return s.send(ptpwire.SubmitJobError(m.TID, subID, CodeSubmit, err.Error()))
	}
	doc, _ := json.Marshal(args)
	rctx, cancel := context.WithTimeout(ctx, s.svc.cfg.RequestTimeout)
	defer cancel()
	jobs, err := s.svc.deps.Submit.Submit(rctx, doc, "ptp-submit-"+subID, s.grant)
	if err != nil {
		return s.send(ptpwire.SubmitJobError(m.TID, subID, CodeSubmit, err.Error()))
	}
	for _, id := range jobs {
		s.subIDs[id] = subID
	}
	return s.send(ptpwire.OK(m.TID))
}

func (s *session) principal() string {
	if s.grant.Principal != "" && s.grant.Principal != "anonymous" {
		return s.grant.Principal
	}
	return "ptp:" + s.remote
}

// translateQueue turns queueId=<element ID> into queueId=<cluster>/<queue>, the names
// ingest can act on.
func (s *session) translateQueue(args []string) ([]string, error) {
	out := make([]string, 0, len(args))
	for _, a := range args {
		v, ok := strings.CutPrefix(a, "queueId=")
		if !ok {
			out = append(out, a)
			continue
		}
		off, ok := s.offsetOf(v)
		q, known := s.svc.static.byOff[off]
		if !ok || !known || q.Cluster == "" {
			return nil, fmt.Errorf("queueId %q is not a queue of this resource manager", v)
		}
		if q.Implied {
			out = append(out, "queueId="+q.Cluster+"/")
		} else {
			out = append(out, "queueId="+q.Cluster+"/"+q.Name)
		}
	}
	return out, nil
}

// offsetOf turns an element ID of this session back into an offset.
func (s *session) offsetOf(id string) (uint32, bool) {
	n, err := strconv.ParseUint(id, 10, 32)
	if err != nil || n <= uint64(s.base) {
		return 0, false
	}
	return uint32(n - uint64(s.base)), true
}

func (s *session) jobOf(id string) (jobView, bool) {
	off, ok := s.offsetOf(id)
	if !ok {
		return jobView{}, false
	}
	return s.svc.model.jobAt(off)
}

func (s *session) terminate(ctx context.Context, m ptpwire.Message) error {
	id, _ := argValue(m.Args, "jobId", 0)
	v, ok := s.jobOf(id)
	if !ok {
		return s.send(ptpwire.TerminateJobError(m.TID, id, CodeNoJob, fmt.Sprintf("%q is not a job of this resource manager", id)))
	}
	if err := s.control(ctx, v, events.CancelRequested, "terminated from PTP"); err != nil {
		return s.send(ptpwire.TerminateJobError(m.TID, id, CodeControl, err.Error()))
	}
	return s.send(ptpwire.OK(m.TID))
}

func (s *session) control(ctx context.Context, v jobView, name events.Name, reason string) error {
	if !s.grant.May(httpapi.PermCancel) {
		return errors.New("the session's token may not cancel, hold or resume")
	}
	// The session's grant goes with the request: the job must be its principal's (or a
	// group peer's, or the token an admin's).
	rctx, cancel := context.WithTimeout(httpapi.WithGrant(ctx, s.grant), s.svc.cfg.RequestTimeout)
	defer cancel()
	return s.svc.deps.Control.Request(rctx, v.JobID, name, reason, s.principal())
}

// changeJob is the design document's CHANGE_JOB (text form only; PTP 5 gave its number to
// SUSPEND_EVENTS), which the document meant for changes such as a hold: gridwire carries
// out jobState=SUSPENDED (hold) and jobState=RUNNING (resume), and refuses anything else.
func (s *session) changeJob(ctx context.Context, m ptpwire.Message) error {
	id, _ := argValue(m.Args, "jobId", 0)
	v, ok := s.jobOf(id)
	if !ok {
		return s.send(ptpwire.Error(m.TID, CodeNoJob, fmt.Sprintf("CHANGE_JOB: %q is not a job of this resource manager", id)))
	}
	var name events.Name
	for _, a := range m.Args {
		switch {
		case strings.HasPrefix(a, "jobId=") || a == id:
		case a == "jobState="+StateSuspended:
			name = events.HoldRequested
		case a == "jobState="+StateRunning:
			name = events.ResumeRequested
		default:
			return s.send(ptpwire.Error(m.TID, CodeNotImplemented, fmt.Sprintf("CHANGE_JOB: %q cannot be changed (only jobState=SUSPENDED or RUNNING)", a)))
		}
	}
	if name == "" {
		return s.send(ptpwire.Error(m.TID, CodeProtocol, "CHANGE_JOB: no jobState to change"))
	}
	if err := s.control(ctx, v, name, "changed from PTP"); err != nil {
		return s.send(ptpwire.Error(m.TID, CodeControl, err.Error()))
	}
	return s.send(ptpwire.OK(m.TID))
}
