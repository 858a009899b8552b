package events_test

import (
	"context"
	"errors"
	"testing"

	"github.com/gridwire/gridwire/events"
)

// A consumer may be handed an event that the replica answering its reads has not
// stored yet (a follower catching up after a leader change). Deciding on that older
// state either acts twice or, worse, sees nothing to do and acks the event for good.
// The store must refuse to decide until its read includes the consumed event.
func TestDecideOnNeverUsesAStateOlderThanTheEvent(t *testing.T) {
	b, writer := openStore(t)
	ctx := context.Background()
	id := events.NewID()
	seq, err := writer.Create(ctx, submitted(t, id))
	if err != nil {
		t.Fatal(err)
	}
	inc, err := events.New(id, events.Incarnated, "", t0, events.IncarnatedData{Cluster: "local"})
	if err != nil {
		t.Fatal(err)
	}
	incSeq, err := writer.Append(ctx, seq, "", inc)
	if err != nil {
		t.Fatal(err)
	}

	// A reader that knows the job only from the log, handed an event stored later than
	// anything the log shows it (as a lagging replica would answer).
	reader := events.NewStore(b.Conn, b.JS, "test/reader", events.WithStateCache(0))
	ahead := inc
	ahead.Seq, ahead.PrevSeq = incSeq+50, incSeq+49
	decided := 0
	_, err = reader.DecideOn(ctx, ahead, func(st events.State) ([]events.Event, error) {
		decided++
		return nil, nil
	})
	if !errors.Is(err, events.ErrStale) {
		t.Fatalf("DecideOn with the log behind the event: err = %v, want ErrStale", err)
	}
	if decided != 0 {
		t.Fatalf("the decision was asked %d times on a state older than its event", decided)
	}
	if _, err := reader.StateAt(ctx, ahead); !errors.Is(err, events.ErrStale) {
		t.Fatalf("StateAt with the log behind the event: err = %v, want ErrStale", err)
	}

	// The same event at its real sequence is decided on a state that includes it.
	inc.Seq, inc.PrevSeq = incSeq, seq
	st, err := reader.DecideOn(ctx, inc, func(st events.State) ([]events.Event, error) {
		if st.LastSeq < incSeq || st.Status != events.StatusIncarnated {
			t.Errorf("decided on %s at %d, want incarnated at %d", st.Status, st.LastSeq, incSeq)
		}
		return nil, nil
	})
	if err != nil || st.LastSeq != incSeq {
		t.Fatalf("DecideOn at the event: %v at %d", err, st.LastSeq)
	}
}
