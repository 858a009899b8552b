package events

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// createWindow bounds the appends CreateAll has sent and not yet seen acknowledged.
const createWindow = 512

// CreateAll appends the first event of each of many new jobs, each as Create would,
// conditional on its job having no events, but pipelined: a window of appends is sent
// before any acknowledgement is awaited, and the next window is signed, encoded and
// sent while the server still stores the last, so a bulk submission costs about one
// round trip per window rather than one per job, and the client's encoding overlaps the
// server's storing. At most two windows are unacknowledged at a time; every append is
// sent in the order of evs. errs[i] is the outcome of evs[i] (nil: stored and
// acknowledged). An append that timed out or conflicted is settled as Create settles
// it, by reading the job's last message.
func (s *Store) CreateAll(ctx context.Context, evs []Event) (seqs []uint64, errs []error) {
	seqs, errs = make([]uint64, len(evs)), make([]error, len(evs))
	var pending *sentWindow
	for from := 0; from < len(evs); from += createWindow {
		to := min(from+createWindow, len(evs))
		sent := s.sendWindow(evs[from:to], errs[from:to])
		sent.seqs = seqs[from:to]
		if pending != nil {
			s.settleWindow(ctx, pending)
		}
		pending = sent
	}
	if pending != nil {
		s.settleWindow(ctx, pending)
	}
	return seqs, errs
}

// sentWindow is a window of appends sent and not yet settled: through the store's own
// pipe (pipe), or as jetstream futures.
type sentWindow struct {
	evs     []Event
	pipe    *pipeWindow
	futures []jetstream.PubAckFuture
	seqs    []uint64
	errs    []error
}

// sendWindow signs, encodes and sends a window's appends without waiting for any
// acknowledgement; an event that could not be sent has its error in errs.
func (s *Store) sendWindow(evs []Event, errs []error) *sentWindow {
	w := &sentWindow{evs: evs, errs: errs}
	for i := range evs {
		e := &evs[i]
		if e.Source == "" {
			e.Source = s.source
		}
		e.PrevHash, e.PrevSeq = "", 0
	}
	s.signAll(evs, errs)
	if s.piped() {
		if pw, err := s.pipe.open(s.nc, len(evs)); err == nil {
			w.pipe = pw
			s.sendPiped(w)
			return w
		}
	}
	w.futures = make([]jetstream.PubAckFuture, len(evs))
	for i := range evs {
		if errs[i] != nil {
			continue
		}
		e := &evs[i]
		body, err := e.Encode()
		if err != nil {
			errs[i] = err
			continue
		}
		msg := &nats.Msg{Subject: e.subject(), Data: body, Header: nats.Header{}}
		w.futures[i], errs[i] = s.js.PublishMsgAsync(msg, jetstream.WithMsgID(e.ID),
			jetstream.WithExpectLastSequenceForSubject(0, JobFilter(e.JobID)))
	}
	return w
}

// sendPiped sends a window's appends through the pipe: the messages PublishMsgAsync
// sends for them (the same headers: the event's ID as the message ID, no earlier event
// of its job as the condition), with one header map for the window, since each message
// is written out before the next is made.
func (s *Store) sendPiped(w *sentWindow) {
	id, last, filter := []string{""}, []string{"0"}, []string{""}
	msg := &nats.Msg{Header: nats.Header{jetstream.MsgIDHeader: id, jetstream.ExpectedLastSubjSeqHeader: last,
		jetstream.ExpectedLastSubjSeqSubjHeader: filter}}
	var reply []byte
	for i := range w.evs {
		if w.errs[i] != nil {
			continue
		}
		e := &w.evs[i]
		body, err := e.Encode()
		if err != nil {
			w.errs[i] = err
			continue
		}
		reply = s.pipe.replyTo(reply, w.pipe, i)
		msg.Subject, msg.Reply, msg.Data = e.subject(), string(reply), body
		id[0], filter[0] = e.ID, JobFilter(e.JobID)
		w.pipe.send(s.nc, msg, i)
	}
	w.pipe.sealed()
}

// settleWindow waits for a sent window's acknowledgements. Once the window's time is
// up, every append not yet acknowledged is settled by a read: the closed Done channel
// never blocks again.
func (s *Store) settleWindow(ctx context.Context, w *sentWindow) {
	wctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	if w.pipe != nil {
		select {
		case <-w.pipe.done:
		case <-wctx.Done():
		}
		s.pipe.settle(w.pipe) // no answer is recorded after this
		for i, a := range w.pipe.acks {
			switch {
			case !a.sent:
				continue
			case !a.got:
				w.errs[i] = context.DeadlineExceeded
			case a.err != nil:
				w.errs[i] = a.err
			default:
				w.seqs[i] = a.seq
			}
			s.settleOne(ctx, w, i)
		}
		return
	}
	for i, f := range w.futures {
		if f == nil {
			continue
		}
		select {
		case ack := <-f.Ok():
			w.seqs[i] = ack.Sequence
		case err := <-f.Err():
			w.errs[i] = err
		case <-wctx.Done():
			w.errs[i] = context.DeadlineExceeded
		}
		s.settleOne(ctx, w, i)
	}
}

// settleOne settles an append whose answer was a timeout or a conflict, as Create
// settles it, by reading the job's last message, and names the job in its error.
func (s *Store) settleOne(ctx context.Context, w *sentWindow, i int) {
	if err := w.errs[i]; err != nil && (isConflict(err) || isTimeout(err)) && ctx.Err() == nil {
		w.seqs[i], w.errs[i] = s.Create(ctx, w.evs[i]) // settled one at a time, as Create does
	}
	if w.errs[i] != nil {
		w.errs[i] = fmt.Errorf("appending %s to job %s: %w", w.evs[i].Name, w.evs[i].JobID, w.errs[i])
	}
}

// signAll signs a window's complete events with the store's key, when it has one: one
// batch signature for many events (SigningKey.SignAll) instead of one signature each.
// An event the key's role may not write is refused (errs[i]) and left out of the batch.
func (s *Store) signAll(evs []Event, errs []error) {
	if s.key == nil {
		return
	}
	var refused []int
	for i := range evs {
		if err := s.key.grant.May(evs[i], State{}); err != nil {
			errs[i] = fmt.Errorf("appending %s to job %s: %w", evs[i].Name, evs[i].JobID, err)
			refused = append(refused, i)
		}
	}
	if len(refused) == 0 {
		s.key.SignAll(evs)
		return
	}
	mayWrite := make([]Event, 0, len(evs)-len(refused))
	for i := range evs {
		if errs[i] == nil {
			mayWrite = append(mayWrite, evs[i])
		}
	}
	s.key.SignAll(mayWrite)
	for i, j := 0, 0; i < len(evs); i++ {
		if errs[i] == nil {
			evs[i] = mayWrite[j]
			j++
		}
	}
}
