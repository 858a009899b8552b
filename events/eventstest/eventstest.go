// Package eventstest gives tests a real event log: an embedded nats-server with
// JetStream and a file store in the test's temporary directory, the JOBS stream
// provisioned as in production, and a Store on it. It also reads and writes the replay
// fixtures (recorded job histories with the states they fold to). It owns nothing else.
package eventstest

import (
	"context"
	"testing"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/pkg/bus"
)

// Open starts the server for one test and returns it with a store whose events carry
// the given source. Everything stops when the test ends.
func Open(t testing.TB, source string) (*bus.Bus, *events.Store) {
	t.Helper()
	ctx := context.Background()
	b, err := bus.Open(ctx, bus.Config{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	if _, err := events.Provision(ctx, b.JS, events.StreamOptions{}); err != nil {
		t.Fatal(err)
	}
	return b, events.NewStore(b.Conn, b.JS, source)
}

// Names lists a job's event names in stream order.
func Names(t testing.TB, st *events.Store, jobID string) []events.Name {
	t.Helper()
	h, err := st.Load(context.Background(), jobID)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]events.Name, 0, len(h.Events))
	for _, e := range h.Events {
		out = append(out, e.Name)
	}
	return out
}

// Count is how many times n occurs in names.
func Count(names []events.Name, n events.Name) int {
	c := 0
	for _, x := range names {
		if x == n {
			c++
		}
	}
	return c
}
