package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// The audit asks again while a server does not answer (a cluster electing a leader after
// a node restarted), says so, and gives up after its patience with how long it tried; a
// refusal of any other kind ends it at once.
func TestAuditAsksAgainWhileTheServerDoesNotAnswer(t *testing.T) {
	var stderr bytes.Buffer
	e := &env{stderr: &stderr}
	ctx := context.Background()

	calls := 0
	err := retryTransient(ctx, e, "comparing the property view", time.Minute, func() error {
		if calls++; calls < 3 {
			return nats.ErrNoResponders
		}
		return nil
	})
	if err != nil || calls != 3 {
		t.Fatalf("after two unanswered tries: %v, %d calls", err, calls)
	}
	if got := strings.Count(stderr.String(), "comparing the property view: nats: no responders available for request; trying again in"); got != 2 {
		t.Errorf("stderr says %d times that it tries again:\n%s", got, stderr.String())
	}

	refused := errors.New("permission denied")
	calls = 0
	if err := retryTransient(ctx, e, "reading the log", time.Minute, func() error { calls++; return refused }); !errors.Is(err, refused) || calls != 1 {
		t.Errorf("a refusal: %v after %d calls, want it at once", err, calls)
	}

	calls = 0
	err = retryTransient(ctx, e, "reading the log", 600*time.Millisecond, func() error { calls++; return nats.ErrNoResponders })
	if !errors.Is(err, nats.ErrNoResponders) || !strings.Contains(err.Error(), "the server did not answer in") || calls < 2 {
		t.Errorf("past its patience: %v after %d calls", err, calls)
	}
}
