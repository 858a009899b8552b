package bus

import (
	"context"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// forgetTimeout bounds the request that deletes a finished reader's consumer.
const forgetTimeout = 5 * time.Second

// ConsumerDeleter deletes a consumer of one stream: a jetstream.Stream, or OfStream's
// adapter of a JetStream context.
type ConsumerDeleter interface {
	DeleteConsumer(ctx context.Context, consumer string) error
}

// OfStream is a ConsumerDeleter for the named stream through js.
func OfStream(js jetstream.JetStream, stream string) ConsumerDeleter {
	return streamDeleter{js: js, stream: stream}
}

type streamDeleter struct {
	js     jetstream.JetStream
	stream string
}

func (d streamDeleter) DeleteConsumer(ctx context.Context, consumer string) error {
	return d.js.DeleteConsumer(ctx, d.stream, consumer)
}

// Forget deletes the server's consumer behind an ordered consumer whose reading has
// stopped. nats.go stops pulling but leaves that consumer on the server until it has
// been idle for five minutes, and the server (v2.15 and later) refuses a stream more
// than 1,000 consumers unless configured otherwise: with one consumer for each event
// stream a client follows, `gridwire submit --wait` of a 2,000-task topology failed
// with "maximum consumers limit reached" part way. The deletion outlives the caller's
// context (a request that ended is usually why the reading stopped) but is bounded; a
// consumer it cannot delete still goes when its idle time runs out.
func Forget(ctx context.Context, d ConsumerDeleter, cons jetstream.Consumer) {
	if cons == nil {
		return
	}
	info := cons.CachedInfo()
	if info == nil || info.Name == "" {
		return
	}
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), forgetTimeout)
	defer cancel()
	_ = d.DeleteConsumer(dctx, info.Name)
}
