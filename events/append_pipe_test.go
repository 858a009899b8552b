package events_test

import (
	"context"
	"errors"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/events/eventstest"
	"github.com/gridwire/gridwire/pkg/bus"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// pipeAndJetStream is a store publishing through its own pipe, one on the same stream
// publishing through jetstream (WithJetStreamPublish), and the stream.
func pipeAndJetStream(t *testing.T) (pipe, viaJS *events.Store, stream jetstream.Stream) {
	t.Helper()
	b, pipe := openStore(t)
	stream, err := b.JS.Stream(context.Background(), events.Stream)
	if err != nil {
		t.Fatal(err)
	}
	return pipe, events.NewStore(b.Conn, b.JS, "test/store", events.WithJetStreamPublish()), stream
}

// storedEvents is how many messages the JOBS stream holds.
func storedEvents(t *testing.T, b *bus.Bus) uint64 {
	t.Helper()
	stream, err := b.JS.Stream(context.Background(), events.Stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := stream.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}

// CreateAll through the store's own pipe and through jetstream's PublishMsgAsync store
// the same message for an event: the same subject, body and headers (the message ID
// that de-duplicates a retry, the condition on the job's last sequence).
func TestCreateAllPipeSendsWhatJetStreamSends(t *testing.T) {
	st, viaJS, stream := pipeAndJetStream(t)
	ctx := context.Background()
	var err error
	var got [2]*jetstream.RawStreamMsg
	for k, s := range []*events.Store{st, viaJS} {
		e := submitted(t, "JOB")
		e.ID, e.JobID = "EVENT1", "JOB"
		if k == 1 {
			e.ID, e.JobID = "EVENT2", "JOB2" // a job of its own, the same event otherwise
		}
		seqs, errs := s.CreateAll(ctx, []events.Event{e, submitted(t, events.NewID())})
		if errs[0] != nil || errs[1] != nil {
			t.Fatal(errs)
		}
		if got[k], err = stream.GetMsg(ctx, seqs[0]); err != nil {
			t.Fatal(err)
		}
	}
	pipe, js := got[0], got[1]
	if pipe.Subject != "jobs.JOB.submitted._" || js.Subject != "jobs.JOB2.submitted._" {
		t.Fatalf("subjects %q and %q", pipe.Subject, js.Subject)
	}
	if p, j := pipe.Header.Get(jetstream.MsgIDHeader), js.Header.Get(jetstream.MsgIDHeader); p != "EVENT1" || j != "EVENT2" {
		t.Errorf("message IDs %q and %q", p, j)
	}
	if p, j := pipe.Header.Get(jetstream.ExpectedLastSubjSeqHeader), js.Header.Get(jetstream.ExpectedLastSubjSeqHeader); p != "0" || j != "0" {
		t.Errorf("expected last sequences %q and %q", p, j)
	}
	if p, j := pipe.Header.Get(jetstream.ExpectedLastSubjSeqSubjHeader), js.Header.Get(jetstream.ExpectedLastSubjSeqSubjHeader); p != "jobs.JOB.>" || j != "jobs.JOB2.>" {
		t.Errorf("conditions on %q and %q", p, j)
	}
	if len(pipe.Header) != len(js.Header) {
		t.Errorf("headers %v through the pipe, %v through jetstream", pipe.Header, js.Header)
	}
	// The bodies differ only in the job's ID and its time; both decode to the event.
	for _, m := range []*jetstream.RawStreamMsg{pipe, js} {
		e, err := events.DecodeStored(m.Data, m.Subject, m.Sequence)
		if err != nil || e.ID[:5] != "EVENT" || e.Source != "test/store" {
			t.Fatalf("stored %s: %+v, %v", m.Data, e, err)
		}
	}
}

// Acknowledgements lost on the way (the append stored, the store never answered) are
// settled by reading the job back: CreateAll reports every job stored, at its own
// sequence, and none is stored twice.
func TestCreateAllSettlesLostAcknowledgements(t *testing.T) {
	b, _ := openStore(t)
	st := events.NewStore(b.Conn, b.JS, "test/store", events.WithTimeout(300*time.Millisecond))
	events.DropPipeAcks(st, func(i int) bool { return i%3 == 1 })
	ctx := context.Background()
	var evs []events.Event
	for range 700 { // two windows
		evs = append(evs, submitted(t, events.NewID()))
	}
	seqs, errs := st.CreateAll(ctx, evs)
	for i, err := range errs {
		if err != nil || seqs[i] == 0 {
			t.Fatalf("job %d: %v at %d", i, err, seqs[i])
		}
	}
	if n := storedEvents(t, b); n != uint64(len(evs)) {
		t.Fatalf("%d messages stored for %d jobs", n, len(evs))
	}
	for _, i := range []int{0, 1, 4, 511, 512, 513, 699} {
		h, err := st.Load(ctx, evs[i].JobID)
		if err != nil || len(h.Events) != 1 || h.LastSeq != seqs[i] || h.Events[0].ID != evs[i].ID {
			t.Fatalf("job %d: %d events at %d (want 1 at %d), %v", i, len(h.Events), h.LastSeq, seqs[i], err)
		}
	}
}

// An acknowledgement is read as jetstream reads it: the plain form directly, the rest
// (an error, a duplicate, a domain) by encoding/json, no stream as
// ErrNoStreamResponse, anything else as ErrInvalidJSAck.
func TestReadPubAck(t *testing.T) {
	status := func(code string) *nats.Msg { return &nats.Msg{Header: nats.Header{"Status": {code}}} }
	for _, c := range []struct {
		m    *nats.Msg
		seq  uint64
		want error
		code jetstream.ErrorCode
	}{
		{m: &nats.Msg{Data: []byte(`{"stream":"JOBS","seq":42}`)}, seq: 42},
		{m: &nats.Msg{Data: []byte(`{"stream":"JOBS","seq":18446744073709551615}`)}, seq: 18446744073709551615},
		{m: &nats.Msg{Data: []byte(`{"stream":"JOBS","seq":7,"duplicate":true}`)}, seq: 7},
		{m: &nats.Msg{Data: []byte(`{"stream":"JOBS", "domain":"hub","seq":9}`)}, seq: 9},
		{m: &nats.Msg{Data: []byte(`{"stream":"J\"X","seq":5}`)}, seq: 5},
		{m: &nats.Msg{Data: []byte(`{"error":{"code":400,"err_code":10071,"description":"wrong last sequence: 3"},"stream":"JOBS","seq":0}`)},
			code: jetstream.JSErrCodeStreamWrongLastSequence},
		{m: status("503"), want: jetstream.ErrNoStreamResponse},
		{m: status("408"), want: jetstream.ErrInvalidJSAck},
		{m: &nats.Msg{Data: []byte(`{"seq":3}`)}, want: jetstream.ErrInvalidJSAck},
		{m: &nats.Msg{Data: []byte(`{"stream":"JOBS","seq":01}`)}, want: jetstream.ErrInvalidJSAck},
		{m: &nats.Msg{Data: []byte(`not json`)}, want: jetstream.ErrInvalidJSAck},
	} {
		seq, err := events.ReadPubAck(c.m)
		var apiErr *jetstream.APIError
		switch {
		case c.code != 0:
			if !errors.As(err, &apiErr) || apiErr.ErrorCode != c.code {
				t.Errorf("%s: %v, want API error %d", c.m.Data, err, c.code)
			}
		case !errors.Is(err, c.want) || seq != c.seq:
			t.Errorf("%s %v: %d, %v; want %d, %v", c.m.Data, c.m.Header, seq, err, c.seq, c.want)
		}
	}
}

// A single append through the store's own pipe stores the message jetstream's
// PublishMsg stores: the same subject, and the same headers (the event's ID, the
// condition on the job's last sequence and the filter it applies to).
func TestAppendPipeSendsWhatJetStreamSends(t *testing.T) {
	st, viaJS, stream := pipeAndJetStream(t)
	ctx := context.Background()
	var err error
	var got [2]*jetstream.RawStreamMsg
	var first [2]uint64
	for k, s := range []*events.Store{st, viaJS} {
		id := []string{"JOB", "JOB2"}[k]
		if first[k], err = s.Create(ctx, submitted(t, id)); err != nil {
			t.Fatal(err)
		}
		e, _ := events.New(id, events.HoldRequested, "", t0, events.Note{})
		seq, err := s.Append(ctx, first[k], "", e)
		if err != nil {
			t.Fatal(err)
		}
		if got[k], err = stream.GetMsg(ctx, seq); err != nil {
			t.Fatal(err)
		}
	}
	pipe, js := got[0], got[1]
	if pipe.Subject != "jobs.JOB.hold_requested._" || js.Subject != "jobs.JOB2.hold_requested._" {
		t.Fatalf("subjects %q and %q", pipe.Subject, js.Subject)
	}
	for _, h := range []string{jetstream.MsgIDHeader, jetstream.ExpectedLastSubjSeqHeader, jetstream.ExpectedLastSubjSeqSubjHeader} {
		if pipe.Header.Get(h) == "" || js.Header.Get(h) == "" {
			t.Errorf("header %s: %q through the pipe, %q through jetstream", h, pipe.Header.Get(h), js.Header.Get(h))
		}
	}
	if p, j := pipe.Header.Get(jetstream.ExpectedLastSubjSeqHeader), js.Header.Get(jetstream.ExpectedLastSubjSeqHeader); p != strconv.FormatUint(first[0], 10) || j != strconv.FormatUint(first[1], 10) {
		t.Errorf("expected last sequences %q and %q, want %d and %d", p, j, first[0], first[1])
	}
	if p := pipe.Header.Get(jetstream.ExpectedLastSubjSeqSubjHeader); p != "jobs.JOB.>" {
		t.Errorf("condition on %q", p)
	}
	if len(pipe.Header) != len(js.Header) {
		t.Errorf("headers %v through the pipe, %v through jetstream", pipe.Header, js.Header)
	}
	// The condition holds through the pipe: an append on a stale sequence conflicts.
	e, _ := events.New("JOB", events.HoldRequested, "", t0, events.Note{})
	if _, err := st.Append(ctx, first[0], "", e); !errors.Is(err, events.ErrConflict) {
		t.Fatalf("append on a stale sequence through the pipe: %v, want a conflict", err)
	}
}

// A single append whose acknowledgement is lost (stored, never answered) is settled by
// reading the job back: Append reports the sequence it was stored at, once.
func TestAppendSettlesALostAcknowledgement(t *testing.T) {
	b, _ := openStore(t)
	st := events.NewStore(b.Conn, b.JS, "test/store", events.WithTimeout(200*time.Millisecond))
	ctx := context.Background()
	first, err := st.Create(ctx, submitted(t, "JOB"))
	if err != nil {
		t.Fatal(err)
	}
	events.DropPipeAcks(st, func(int) bool { return true })
	e, _ := events.New("JOB", events.HoldRequested, "", t0, events.Note{})
	seq, err := st.Append(ctx, first, "", e)
	if err != nil || seq != first+1 {
		t.Fatalf("append with its acknowledgement lost: %d, %v; want %d", seq, err, first+1)
	}
	if names := eventstest.Names(t, st, "JOB"); len(names) != 2 {
		t.Fatalf("history %v", names)
	}
}

// An append that no stream answers (none yet, or a leader being elected) is sent again
// after a moment, as jetstream's PublishMsg does: it lands once the stream is there.
func TestAppendWaitsForAStreamToAnswer(t *testing.T) {
	ctx := context.Background()
	b, err := bus.Open(ctx, bus.Config{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	st := events.NewStore(b.Conn, b.JS, "test/store")
	go func() {
		time.Sleep(100 * time.Millisecond)
		if _, err := events.Provision(ctx, b.JS, events.StreamOptions{}); err != nil {
			t.Error(err)
		}
	}()
	if _, err := st.Create(ctx, submitted(t, "JOB")); err != nil {
		t.Fatalf("append while the stream was being made: %v", err)
	}
	if names := eventstest.Names(t, st, "JOB"); len(names) != 1 {
		t.Fatalf("history %v", names)
	}
}

// Appends dropped on their way (no server saw them) are sent again once their time is up
// and the job's log shows they did not land; appends whose answers were lost are found
// landed. Every one lands, once, through CreateAll and through Append alike.
func TestPipeFaultsLoseNoAppend(t *testing.T) {
	b, _ := openStore(t)
	var sends, drops, lost atomic.Int64
	fault := func() (bool, bool) { // every third send dropped, the next one's answer lost
		switch sends.Add(1) % 3 {
		case 0:
			drops.Add(1)
			return true, false
		case 1:
			lost.Add(1)
			return false, true
		}
		return false, false
	}
	st := events.NewStore(b.Conn, b.JS, "test/store", events.WithTimeout(150*time.Millisecond),
		events.WithPublishFaults(fault))
	ctx := context.Background()
	var evs []events.Event
	for range 30 {
		evs = append(evs, submitted(t, events.NewID()))
	}
	seqs, errs := st.CreateAll(ctx, evs)
	for i, err := range errs {
		if err != nil || seqs[i] == 0 {
			t.Fatalf("job %d: %v at %d", i, err, seqs[i])
		}
	}
	for i := range 6 {
		e, _ := events.New(evs[i].JobID, events.HoldRequested, "", t0, events.Note{})
		seq, err := st.Append(ctx, seqs[i], "", e)
		if err != nil || seq == 0 {
			t.Fatalf("append to job %d: %d, %v", i, seq, err)
		}
	}
	if drops.Load() == 0 || lost.Load() == 0 {
		t.Fatalf("faults injected: %d dropped, %d answers lost", drops.Load(), lost.Load())
	}
	if n := storedEvents(t, b); n != uint64(len(evs)+6) {
		t.Fatalf("%d messages stored for %d appends (%d sends, %d dropped, %d answers lost)",
			n, len(evs)+6, sends.Load(), drops.Load(), lost.Load())
	}
	for i := range evs {
		want := 1
		if i < 6 {
			want = 2
		}
		if names := eventstest.Names(t, st, evs[i].JobID); len(names) != want {
			t.Fatalf("job %d: history %v", i, names)
		}
	}
}
