package readside

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/gridwire/gridwire/events"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

func TestAuditCleanLog(t *testing.T) {
	b, st := openBus(t)
	for n := 0; n < 3; n++ {
		id := events.NewID()
		play(t, st, id, t0, life(id, "c1", n))
	}
	rep, err := Audit(context.Background(), b.JS, "", nil)
	if err != nil || !rep.OK() || rep.Jobs != 3 || rep.Events != 33 {
		t.Fatalf("audit of a clean log: %+v %v", rep, err)
	}
}

// A forged event published straight to the stream, bypassing the store, with a made-up
// prevhash: the stream's DenyDelete keeps it, and the audit names it.
func TestAuditFindsForgedEvent(t *testing.T) {
	b, st := openBus(t)
	victim, other := events.NewID(), events.NewID()
	play(t, st, victim, t0, life(victim, "c1", 1)[:8]) // RUNNING
	play(t, st, other, t0, life(other, "c1", 0))
	forged, _ := events.New(victim, events.Exited, "c1", t0.Add(time.Minute), events.ExitedData{ExitCode: 0})
	forged.Source, forged.PrevSeq = "gridwire/watcher/host-1", 8
	forged.PrevHash = strings.Repeat("0", 64)
	body, err := forged.Encode()
	if err != nil {
		t.Fatal(err)
	}
	ack, err := b.JS.Publish(context.Background(), events.Subject(victim, events.Exited, "c1"), body)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Audit(context.Background(), b.JS, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Broken) != 1 || rep.Broken[0].Job != victim || rep.Broken[0].Seq != ack.Sequence ||
		!strings.Contains(rep.Broken[0].Problem, "prevhash") {
		t.Fatalf("audit: %+v, want the forged event at seq %d", rep.Broken, ack.Sequence)
	}
	// Verifying the one job finds the same link; the other job verifies.
	one, _ := Audit(context.Background(), b.JS, victim, nil)
	if len(one.Broken) != 1 || one.Broken[0] != rep.Broken[0] {
		t.Fatalf("audit of the victim: %+v", one.Broken)
	}
	if clean, _ := Audit(context.Background(), b.JS, other, nil); !clean.OK() || clean.Events != 11 {
		t.Fatalf("audit of the other job: %+v", clean)
	}
}

// An event whose stored body was re-encoded on its way in (same facts, other bytes):
// its successor, written by a store that hashed the body it meant to store, no longer
// links to it, and the audit reports that link.
func TestAuditFindsReencodedBody(t *testing.T) {
	b, st := openBus(t)
	id := events.NewID()
	steps := life(id, "c1", 0)
	play(t, st, id, t0, steps[:2])
	h, _ := st.Load(context.Background(), id)
	last := h.Events[len(h.Events)-1]
	e, _ := events.New(id, steps[2].Name, steps[2].Route, t0.Add(time.Hour), steps[2].Payload)
	e.Source, e.PrevHash, e.PrevSeq = "gridwire/stager/host-1", last.Hash, last.Seq
	meant, _ := e.Encode()
	var indented bytes.Buffer
	_ = json.Indent(&indented, meant, "", "  ") // the same event, re-encoded
	ack, err := b.JS.PublishMsg(context.Background(), &nats.Msg{Subject: events.Subject(id, e.Name, e.Route),
		Data: indented.Bytes()}, jetstreamExpect(last.Seq, id)...)
	if err != nil {
		t.Fatal(err)
	}
	// The writer goes on from the state it folded with the hash of what it meant to store.
	e.Seq, e.Hash = ack.Sequence, events.HashOf(meant)
	stt, _ := events.Replay(append(h.Events, e))
	next, _ := events.New(id, steps[3].Name, steps[3].Route, t0.Add(2*time.Hour), steps[3].Payload)
	if _, err := st.DecideFrom(context.Background(), stt, func(events.State) ([]events.Event, error) {
		return []events.Event{next}, nil
	}); err != nil {
		t.Fatal(err)
	}
	rep, err := Audit(context.Background(), b.JS, id, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Broken) != 1 || rep.Broken[0].Seq != ack.Sequence+1 || !strings.Contains(rep.Broken[0].Problem, "prevhash") {
		t.Fatalf("audit: %+v, want the link after seq %d broken", rep.Broken, ack.Sequence)
	}
}

// Two more ways to bend a history: a conditional append with a made-up hash (the server
// checks only the sequence), and an event stored under another job's subject.
func TestAuditFindsWrongHashAndMisfiledEvent(t *testing.T) {
	b, st := openBus(t)
	a, c := events.NewID(), events.NewID()
	play(t, st, a, t0, life(a, "c1", 0)[:2])
	play(t, st, c, t0, life(c, "c1", 0)[:2])
	ha, _ := st.Load(context.Background(), a)
	e, _ := events.New(a, events.StagingIn, "", t0, events.StagingData{Direction: "in"})
	seq, err := st.Append(context.Background(), ha.LastSeq, "not-the-hash", e)
	if err != nil {
		t.Fatal(err)
	}
	hc, _ := st.Load(context.Background(), c)
	m, _ := events.New(a, events.HoldRequested, "", t0, events.Note{}) // says job a
	m.Source, m.PrevHash, m.PrevSeq = "x/y", hc.Events[1].Hash, hc.LastSeq
	body, _ := m.Encode()
	ack, err := b.JS.Publish(context.Background(), events.Subject(c, events.HoldRequested, ""), body)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Audit(context.Background(), b.JS, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]uint64{a: seq, c: ack.Sequence}
	if len(rep.Broken) != 2 {
		t.Fatalf("audit: %+v, want two broken jobs", rep.Broken)
	}
	for _, br := range rep.Broken {
		if want[br.Job] != br.Seq {
			t.Errorf("job %s broken at %d (%s), want %d", br.Job, br.Seq, br.Problem, want[br.Job])
		}
	}
}

func jetstreamExpect(last uint64, job string) []jetstream.PublishOpt {
	return []jetstream.PublishOpt{jetstream.WithExpectLastSequenceForSubject(last, events.JobFilter(job))}
}
