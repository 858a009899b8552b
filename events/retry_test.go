package events

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// A context that ends while RetryTransient waits stops it, and says so: a starting
// service takes that for a clean stop, where an error of try's own is not one.
func TestRetryTransientStopsWhenItsContextEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	waits := 0
	stopped, err := RetryTransient(ctx, 0, func(time.Duration, error) { waits++; cancel() }, func() error { return nats.ErrNoResponders })
	if !stopped || !errors.Is(err, context.Canceled) || waits != 1 {
		t.Errorf("cancelled in its first wait: stopped %v, %v, %d waits", stopped, err, waits)
	}
	refused := errors.New("bad spec")
	if stopped, err := RetryTransient(ctx, 0, func(time.Duration, error) { t.Error("waited on a refusal") }, func() error { return refused }); stopped || !errors.Is(err, refused) {
		t.Errorf("a refusal: stopped %v, %v", stopped, err)
	}
}
