package main

import (
	"context"
	"testing"
	"time"

	"github.com/gridwire/gridwire/events"
	"github.com/nats-io/nats.go"
)

// The bus can show an event before the event that caused it, since the two come from
// different connections: a job's succeeded (the watcher's) before its staged_out (the
// stager's). The idle job's hops follow the stored history, and wait for each of its
// events to be seen, however late.
func TestBenchPathFollowsTheLogNotTheBus(t *testing.T) {
	w := newEndWatch()
	w.keepPaths()
	id := events.NewID()
	life := []events.Name{events.Submitted, events.Incarnated, events.Queued, events.Started, events.Exited,
		events.StagedOut, events.Succeeded}
	var history []events.Event
	for _, n := range life {
		history = append(history, events.Event{JobID: id, Name: n})
	}
	see := func(n events.Name) { w.observe(&nats.Msg{Subject: events.Subject(id, n, "")}) }
	for _, n := range life {
		if n != events.StagedOut {
			see(n)
		}
	}
	late := make(chan time.Time, 1)
	go func() {
		time.Sleep(50 * time.Millisecond)
		late <- time.Now()
		see(events.StagedOut)
	}()
	at, err := w.waitPath(context.Background(), id, history, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	sentAt := <-late
	if len(at) != len(life) {
		t.Fatalf("%d sightings for %d events", len(at), len(life))
	}
	if staged := at[5]; staged.Before(sentAt) || !at[6].Before(staged) {
		t.Errorf("staged_out seen at %v (sent %v), succeeded at %v: not matched to the history's order", staged, sentAt, at[6])
	}

	// A job whose stored event never shows on the bus is reported, not waited on forever.
	other := events.NewID()
	w.observe(&nats.Msg{Subject: events.Subject(other, events.Submitted, "")})
	_, err = w.waitPath(context.Background(), other, []events.Event{{JobID: other, Name: events.Submitted},
		{JobID: other, Name: events.Incarnated}}, 100*time.Millisecond)
	if err == nil {
		t.Fatal("a missing event was not reported")
	}
	t.Log(err)
}
