package events

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// StreamOptions are the knobs of the JOBS stream that vary between deployments.
type StreamOptions struct {
	Replicas   int           // 1 embedded, 3 clustered
	Duplicates time.Duration // de-duplication window; default 5 minutes
	MaxBytes   int64         // -1 or 0: unlimited
}

// StreamConfig is the JOBS stream exactly as DESIGN.md decides it: limits retention,
// file storage, no deletes or purges, discard new, a duplicate window of minutes.
func StreamConfig(o StreamOptions) jetstream.StreamConfig {
	if o.Replicas <= 0 {
		o.Replicas = 1
	}
	if o.Duplicates <= 0 {
		o.Duplicates = 5 * time.Minute
	}
	if o.MaxBytes == 0 {
		o.MaxBytes = -1
	}
	return jetstream.StreamConfig{
		Name:        Stream,
		Description: "gridwire job events: the source of truth",
		Subjects:    []string{SubjectAll},
		Retention:   jetstream.LimitsPolicy,
		Storage:     jetstream.FileStorage,
		Discard:     jetstream.DiscardNew,
		DenyDelete:  true,
		DenyPurge:   true,
		Duplicates:  o.Duplicates,
		Replicas:    o.Replicas,
		MaxBytes:    o.MaxBytes,
		MaxMsgs:     -1,
		MaxAge:      0,
		AllowDirect: true,
	}
}

// Provision creates the JOBS stream, or brings an existing one to the decided config.
// A stream already as decided is left alone, so a role that may only read the stream's
// info (an executor, a reader) can start once the gateway or an operator created it.
// Against a fresh cluster it retries while JetStream has no meta leader yet.
func Provision(ctx context.Context, js jetstream.JetStream, o StreamOptions) (jetstream.Stream, error) {
	cfg := StreamConfig(o)
	var lastErr error
	for attempt := 0; attempt < 40; attempt++ {
		actx, cancel := context.WithTimeout(ctx, 2*time.Second)
		s, err := js.Stream(actx, Stream)
		if err == nil && asDecided(s.CachedInfo().Config, cfg) {
			cancel()
			return s, nil
		}
		s, err = js.CreateOrUpdateStream(actx, cfg)
		cancel()
		if err == nil {
			return s, nil
		}
		lastErr = err
		if ctx.Err() != nil || !retryable(err) {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(250 * time.Millisecond):
		}
	}
	return nil, fmt.Errorf("provisioning stream %s: %w", Stream, lastErr)
}

// asDecided reports whether a stream's config holds every decided setting of want.
func asDecided(have, want jetstream.StreamConfig) bool {
	return slices.Equal(have.Subjects, want.Subjects) && have.Retention == want.Retention &&
		have.Storage == want.Storage && have.Discard == want.Discard && have.DenyDelete && have.DenyPurge &&
		have.Duplicates == want.Duplicates && have.Replicas == want.Replicas && have.MaxBytes == want.MaxBytes &&
		have.AllowDirect == want.AllowDirect
}

func retryable(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, jetstream.ErrJetStreamNotEnabled) ||
		errors.Is(err, jetstream.ErrNoHeartbeat) || isNoResponders(err) || clusterInFlux(err)
}

// clusterInFlux reports a JetStream answer that a moment later may be different: no
// meta leader, too few peers up for the replicas asked, a stream whose leader is being
// elected.
func clusterInFlux(err error) bool {
	var apiErr *jetstream.APIError
	if !errors.As(err, &apiErr) {
		return false
	}
	switch apiErr.ErrorCode {
	case 10005, // no suitable peers for placement
		10008, // JetStream system temporarily unavailable
		10009, // cluster can not handle request (not leader)
		10023, // insufficient resources (a peer down)
		10118: // stream is offline
		return true
	}
	return false
}

// Replicas is how many replicas the JOBS stream has. Every bucket that holds a view of
// the log (projections, the watch list, uploads) is given as many, so no part of the
// system is less durable than the log it serves: three on a cluster, one embedded.
func Replicas(ctx context.Context, js jetstream.JetStream) (int, error) {
	s, err := js.Stream(ctx, Stream)
	if err != nil {
		return 0, fmt.Errorf("reading the replicas of stream %s: %w", Stream, err)
	}
	return max(s.CachedInfo().Config.Replicas, 1), nil
}

// Ensure runs make (the creation or opening of a stream or bucket) until it succeeds, an
// error that no retry can mend is returned, ctx ends or about a minute has passed. On a
// cluster a node may be down or a leader being elected at the moment a service starts:
// that is a wait, not a reason for the service to exit.
func Ensure[T any](ctx context.Context, make func(context.Context) (T, error)) (T, error) {
	var zero T
	var lastErr error
	wait := 250 * time.Millisecond
	for deadline := time.Now().Add(time.Minute); ; {
		actx, cancel := context.WithTimeout(ctx, 5*time.Second)
		v, err := make(actx)
		cancel()
		if err == nil {
			return v, nil
		}
		lastErr = err
		if ctx.Err() != nil || !retryable(err) || time.Now().After(deadline) {
			return zero, lastErr
		}
		select {
		case <-ctx.Done():
			return zero, lastErr
		case <-time.After(wait):
		}
		wait = min(wait*2, 2*time.Second)
	}
}
