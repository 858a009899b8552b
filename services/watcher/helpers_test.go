package watcher

import (
	"log/slog"
	"testing"
	"time"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/events/eventstest"
	"github.com/gridwire/gridwire/pkg/bus"
)

var t0 = time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)

// openBus starts an embedded JetStream server with a file store and the JOBS stream.
func openBus(tb testing.TB) (*bus.Bus, *events.Store) { return eventstest.Open(tb, "test/watcher") }

// The scripted lives both read-side and watcher tests play (eventstest has them).
type step = eventstest.Step

var (
	life       = eventstest.Life
	play       = eventstest.Play
	eventually = eventstest.Eventually
)

func nopLog() *slog.Logger { return slog.New(slog.DiscardHandler) }
