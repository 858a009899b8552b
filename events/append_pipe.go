package events

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// ackPipe sends the store's appends (CreateAll's windows, and each single append as a
// window of one: publishPiped) on the store's connection, each with a reply subject
// of its own under one inbox, and reads their acknowledgements itself. It is what
// jetstream's PublishMsgAsync does, less what a bulk append does not need: a future with
// two channels, a timer, a map entry and option closures for every message, a header map
// of its own for every message (kept for a retry CreateAll never asks for), and
// encoding/json for every acknowledgement. The appends are the same messages, with the
// same headers (the message ID, the condition on the job's last sequence), so the server
// stores and checks them as before; an acknowledgement that is not the plain
// {"stream":...,"seq":N} is read by encoding/json into the errors jetstream gives (a
// conflict is a *jetstream.APIError, no stream jetstream.ErrNoStreamResponse), and what
// was not acknowledged in time is settled as before, by reading the job back.
type ackPipe struct {
	mu      sync.Mutex
	prefix  string // the inbox and a dot; "" until started
	sub     *nats.Subscription
	next    uint64
	windows map[uint64]*pipeWindow

	// fault, in fault tests, is what happens to a window's i-th append on its way:
	// dropped (no server sees it; its sender hears nothing until its time is up), or
	// stored with its acknowledgement lost. nil: nothing.
	fault func(i int) (drop, loseAck bool)
}

// pipeWindow is one window of appends sent through the pipe, awaiting their answers.
type pipeWindow struct {
	id      uint64
	mu      sync.Mutex
	sending bool // appends are still being sent: the window is not done before sealed
	closed  bool // done or settled: later answers are dropped
	left    int  // appends sent and not yet answered
	acks    []pipeAck
	done    chan struct{} // closed once left is 0
	fault   func(i int) (drop, loseAck bool)
}

type pipeAck struct {
	sent bool // published: an answer is awaited
	got  bool // answered
	lost bool // its answer is lost on the way (a fault test's)
	seq  uint64
	err  error
}

// start subscribes to the pipe's inbox on nc, once.
func (p *ackPipe) start(nc *nats.Conn) error {
	if p.prefix != "" {
		return nil
	}
	prefix := nc.NewInbox() + "."
	sub, err := nc.Subscribe(prefix+"*.*", func(m *nats.Msg) { p.handle(prefix, m) })
	if err != nil {
		return err
	}
	// Acknowledgements are small and bounded by the windows in flight (two a CreateAll);
	// dropping one would only make its append be read back.
	if err := sub.SetPendingLimits(-1, -1); err != nil {
		_ = sub.Unsubscribe()
		return err
	}
	p.prefix, p.sub, p.windows = prefix, sub, map[uint64]*pipeWindow{}
	return nil
}

// open registers a window of n appends; its answers are collected until settle.
func (p *ackPipe) open(nc *nats.Conn, n int) (*pipeWindow, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.start(nc); err != nil {
		return nil, err
	}
	p.next++
	w := &pipeWindow{id: p.next, sending: true, acks: make([]pipeAck, n), done: make(chan struct{}), fault: p.fault}
	p.windows[w.id] = w
	return w, nil
}

// replyTo is the reply subject of a window's i-th append.
func (p *ackPipe) replyTo(buf []byte, w *pipeWindow, i int) []byte {
	buf = append(buf[:0], p.prefix...)
	buf = strconv.AppendUint(buf, w.id, 10)
	buf = append(buf, '.')
	return strconv.AppendInt(buf, int64(i), 10)
}

// send marks the i-th append published, so that its answer is awaited, and then
// publishes it (marked first: its answer may come before PublishMsg returns). A fault
// test's fault may drop it instead, or lose its answer. An error of PublishMsg is the
// append's answer.
func (w *pipeWindow) send(nc *nats.Conn, msg *nats.Msg, i int) {
	var drop, lose bool
	if w.fault != nil {
		drop, lose = w.fault(i)
	}
	w.mu.Lock()
	w.acks[i].sent, w.acks[i].lost = true, lose
	w.left++
	w.mu.Unlock()
	if drop {
		return
	}
	if err := nc.PublishMsg(msg); err != nil {
		w.mu.Lock()
		w.acks[i].lost = false // a publish that failed here was never on its way
		w.mu.Unlock()
		w.answer(i, 0, err)
	}
}

// sealed is called once every append of the window has been sent (or not): the window
// is done as soon as every one sent is answered.
func (w *pipeWindow) sealed() {
	w.mu.Lock()
	w.sending = false
	if w.left == 0 && !w.closed {
		w.closed = true
		close(w.done)
	}
	w.mu.Unlock()
}

// answer records the i-th append's outcome, unless the window is settled already.
func (w *pipeWindow) answer(i int, seq uint64, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed || i < 0 || i >= len(w.acks) || !w.acks[i].sent || w.acks[i].got || w.acks[i].lost {
		return
	}
	w.acks[i] = pipeAck{sent: true, got: true, seq: seq, err: err}
	if w.left--; w.left == 0 && !w.sending {
		w.closed = true
		close(w.done)
	}
}

// settle ends the window's wait: an append sent and not answered is left with got false.
func (p *ackPipe) settle(w *pipeWindow) {
	w.mu.Lock()
	if !w.closed {
		w.closed = true
		close(w.done)
	}
	w.mu.Unlock()
	p.mu.Lock()
	delete(p.windows, w.id)
	p.mu.Unlock()
}

// handle reads one acknowledgement: <prefix><window>.<index>.
func (p *ackPipe) handle(prefix string, m *nats.Msg) {
	rest, ok := strings.CutPrefix(m.Subject, prefix)
	if !ok {
		return
	}
	ws, is, ok := strings.Cut(rest, ".")
	if !ok {
		return
	}
	id, err1 := strconv.ParseUint(ws, 10, 64)
	i, err2 := strconv.Atoi(is)
	if err1 != nil || err2 != nil {
		return
	}
	p.mu.Lock()
	w := p.windows[id]
	p.mu.Unlock()
	if w == nil {
		return
	}
	seq, err := readPubAck(m)
	w.answer(i, seq, err)
}

// readPubAck is the outcome an acknowledgement reports, as jetstream reads it: the
// plain {"stream":"<name>","seq":<n>} directly, anything else by encoding/json.
func readPubAck(m *nats.Msg) (uint64, error) {
	if len(m.Data) == 0 {
		if m.Header.Get("Status") == "503" {
			return 0, jetstream.ErrNoStreamResponse
		}
		return 0, jetstream.ErrInvalidJSAck
	}
	if seq, ok := plainPubAck(m.Data); ok {
		return seq, nil
	}
	var r struct {
		Error    *jetstream.APIError `json:"error"`
		Stream   string              `json:"stream"`
		Sequence uint64              `json:"seq"`
	}
	if err := json.Unmarshal(m.Data, &r); err != nil {
		return 0, jetstream.ErrInvalidJSAck
	}
	if r.Error != nil {
		return 0, r.Error
	}
	if r.Stream == "" {
		return 0, jetstream.ErrInvalidJSAck
	}
	return r.Sequence, nil
}

// plainPubAck reads {"stream":"<name>","seq":<n>} exactly (a name without escapes, n
// in decimal without a sign or leading zero); ok is false for anything else.
func plainPubAck(b []byte) (uint64, bool) {
	const head, mid = `{"stream":"`, `","seq":`
	if !bytes.HasPrefix(b, []byte(head)) || len(b) < len(head)+1 || b[len(b)-1] != '}' {
		return 0, false
	}
	name, digits, ok := bytes.Cut(b[len(head):len(b)-1], []byte(mid))
	if !ok || len(name) == 0 || bytes.ContainsAny(name, `"\`) || len(digits) == 0 || len(digits) > 19 ||
		digits[0] == '0' && len(digits) > 1 {
		return 0, false
	}
	var seq uint64
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, false
		}
		seq = seq*10 + uint64(c-'0')
	}
	return seq, true
}

// pipeRetries and pipeRetryWait are how often, and after how long, publishPiped sends an
// append again that no stream answered (a leader being elected), as jetstream's
// PublishMsg does by default.
const (
	pipeRetries   = 2
	pipeRetryWait = 250 * time.Millisecond
)

// publishPiped sends one append, its headers already set, through the pipe and waits for
// its acknowledgement until ctx is done: what jetstream's PublishMsg does, less its
// future, its option closures and its decoding of the acknowledgement with encoding/json
// (a single append of a service's decision; CreateAll sends windows). The outcome is
// jetstream's: a conflict is a *jetstream.APIError, no answer in time
// context.DeadlineExceeded, which the caller settles by reading the job back.
func (s *Store) publishPiped(ctx context.Context, msg *nats.Msg) (uint64, error) {
	for r := 0; ; r++ {
		seq, err := s.publishPipedOnce(ctx, msg)
		if r == pipeRetries || !errors.Is(err, jetstream.ErrNoStreamResponse) {
			return seq, err
		}
		t := time.NewTimer(pipeRetryWait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return 0, err
		}
	}
}

func (s *Store) publishPipedOnce(ctx context.Context, msg *nats.Msg) (uint64, error) {
	w, err := s.pipe.open(s.nc, 1)
	if err != nil {
		return 0, err
	}
	defer s.pipe.settle(w)
	var reply [64]byte
	msg.Reply = string(s.pipe.replyTo(reply[:0], w, 0))
	w.send(s.nc, msg, 0)
	msg.Reply = ""
	w.sealed()
	select {
	case <-w.done:
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	w.mu.Lock()
	a := w.acks[0]
	w.mu.Unlock()
	if !a.got {
		return 0, context.DeadlineExceeded
	}
	return a.seq, a.err
}
