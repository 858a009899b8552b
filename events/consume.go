package events

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// ConsumerSpec describes a service's durable pull consumer on the JOBS stream.
type ConsumerSpec struct {
	Durable    string        // name shared by every process of the service (per cluster)
	Filters    []string      // server-side subject filters
	AckWait    time.Duration // default 30s; long work extends it (Heartbeat, Delivery.InProgress)
	MaxDeliver int           // default 8; after that OnExhausted decides
	Batch      int           // messages pulled at a time; default 64
	Workers    int           // concurrent handlers in this process; default 4
	// Heartbeat, when set, extends a delivery's ack deadline at this interval for as
	// long as its handler runs, for handlers whose work may outlast AckWait (a slow
	// START, transfers). A process that dies stops beating, so its deliveries still go to
	// another after AckWait. Keep it well under AckWait. Zero: no heartbeat.
	Heartbeat time.Duration
	// OnExhausted runs when the last allowed delivery of a message failed; it should
	// record the failure in the log (e.g. a failed event). The message is then terminated.
	OnExhausted func(ctx context.Context, d Delivery, err error)
	Logger      *slog.Logger
}

// Delivery is one consumed event.
type Delivery struct {
	Event     Event
	Delivered uint64 // how many times this message has been delivered, 1 the first time
	Last      bool   // no redelivery follows a failure of this one
	msg       jetstream.Msg
}

// InProgress extends the ack deadline while slow work goes on.
func (d Delivery) InProgress() error {
	if d.msg == nil {
		return nil
	}
	return d.msg.InProgress()
}

// Handler reacts to one event. Returning nil acks it; an error asks for a redelivery
// after a back-off. A handler must be idempotent: a redelivery finds its work recorded.
type Handler func(ctx context.Context, d Delivery) error

// Consume runs handler over the durable consumer until ctx ends, then drains: it stops
// pulling and waits for handlers in flight. It returns nil on a clean shutdown. A pull
// that breaks (a missed heartbeat under load, a server restart) is logged and started
// again from the durable consumer, so a service never stops consuming while it runs;
// only a consumer that cannot be created is an error.
func Consume(ctx context.Context, js jetstream.JetStream, spec ConsumerSpec, handler Handler) error {
	spec = spec.withDefaults()
	// A server that does not answer while the service starts (one restarting) is asked
	// again; any other refusal (a bad spec) ends Consume.
	var cons jetstream.Consumer
	stopped, err := RetryTransient(ctx, 0, func(wait time.Duration, err error) {
		spec.Logger.Warn("creating the consumer; trying again", "consumer", spec.Durable, "in", wait, "err", err)
	}, func() (err error) {
		cons, err = ensureConsumer(ctx, js, spec)
		return err
	})
	if stopped {
		return nil
	}
	if err != nil {
		return err
	}
	work := make(chan jetstream.Msg)
	var wg sync.WaitGroup
	// Handlers get their own context: a shutdown lets work in flight finish its append.
	hctx, hcancel := context.WithCancel(context.WithoutCancel(ctx))
	defer hcancel()
	for i := 0; i < spec.Workers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for m := range work {
				handleOne(hctx, spec, handler, m)
			}
		}()
	}
	wait := 250 * time.Millisecond
	for {
		err := pull(ctx, cons, spec, work)
		if ctx.Err() != nil {
			break
		}
		spec.Logger.Warn("pull interrupted; pulling again", "consumer", spec.Durable, "in", wait, "err", err)
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
		wait = min(wait*2, 5*time.Second)
		if c, err := ensureConsumer(ctx, js, spec); err == nil {
			cons = c
		}
	}
	close(work)
	wg.Wait()
	return nil
}

// pull hands messages to the workers until the iterator ends; it returns why.
func pull(ctx context.Context, cons jetstream.Consumer, spec ConsumerSpec, work chan<- jetstream.Msg) error {
	it, err := cons.Messages(jetstream.PullMaxMessages(spec.Batch), jetstream.PullExpiry(5*time.Second))
	if err != nil {
		return fmt.Errorf("consumer %s: %w", spec.Durable, err)
	}
	defer it.Stop()
	stop := context.AfterFunc(ctx, it.Drain)
	defer stop()
	for {
		m, err := it.Next()
		if err != nil {
			return err
		}
		work <- m
	}
}

func (s ConsumerSpec) withDefaults() ConsumerSpec {
	if s.AckWait <= 0 {
		s.AckWait = 30 * time.Second
	}
	if s.MaxDeliver <= 0 {
		s.MaxDeliver = 8
	}
	if s.Batch <= 0 {
		s.Batch = 64
	}
	if s.Workers <= 0 {
		s.Workers = 4
	}
	if s.Logger == nil {
		s.Logger = slog.New(slog.DiscardHandler)
	}
	return s
}

func ensureConsumer(ctx context.Context, js jetstream.JetStream, spec ConsumerSpec) (jetstream.Consumer, error) {
	cfg := jetstream.ConsumerConfig{
		Durable:        spec.Durable,
		FilterSubjects: spec.Filters,
		AckPolicy:      jetstream.AckExplicitPolicy,
		DeliverPolicy:  jetstream.DeliverAllPolicy,
		AckWait:        spec.AckWait,
		MaxDeliver:     spec.MaxDeliver,
		MaxAckPending:  spec.Batch * spec.Workers * 4,
	}
	if len(spec.Filters) == 1 {
		// One filter goes into the request's subject
		// ($JS.API.CONSUMER.CREATE.JOBS.<durable>.<filter>), where a NATS permission can
		// pin it: an executor's user may create its durable only on its cluster's work.
		cfg.FilterSubject, cfg.FilterSubjects = spec.Filters[0], nil
	}
	var lastErr error
	for attempt := 0; attempt < 20; attempt++ {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		c, err := js.CreateOrUpdateConsumer(cctx, Stream, cfg)
		cancel()
		if err == nil {
			return c, nil
		}
		lastErr = err
		if ctx.Err() != nil || !retryable(err) {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	return nil, fmt.Errorf("creating consumer %s: %w", spec.Durable, lastErr)
}

func handleOne(ctx context.Context, spec ConsumerSpec, handler Handler, m jetstream.Msg) {
	meta, err := m.Metadata()
	if err != nil {
		spec.Logger.Error("message without metadata", "err", err)
		_ = m.Term()
		return
	}
	e, err := Decode(m.Data())
	if err != nil {
		spec.Logger.Error("undecodable event terminated", "seq", meta.Sequence.Stream, "err", err)
		_ = m.TermWithReason("undecodable: " + err.Error())
		return
	}
	e.Seq, e.Subject = meta.Sequence.Stream, m.Subject()
	if _, _, route, err := ParseSubject(e.Subject); err == nil && route != NoRoute {
		e.Route = route
	}
	d := Delivery{Event: e, Delivered: meta.NumDelivered, msg: m,
		Last: meta.NumDelivered >= uint64(spec.MaxDeliver)}
	stop := spec.beat(d)
	herr := handler(ctx, d)
	stop()
	switch {
	case herr == nil:
		if err := m.Ack(); err != nil {
			spec.Logger.Warn("ack failed; the event will be redelivered", "job", e.JobID, "seq", e.Seq, "err", err)
		}
	case d.Last:
		spec.Logger.Error("deliveries exhausted", "job", e.JobID, "event", e.Name, "seq", e.Seq, "err", herr)
		if spec.OnExhausted != nil {
			spec.OnExhausted(ctx, d, herr)
		}
		_ = m.TermWithReason(herr.Error())
	default:
		delay := backoff(meta.NumDelivered)
		spec.Logger.Warn("handler failed; redelivering", "job", e.JobID, "event", e.Name,
			"attempt", meta.NumDelivered, "delay", delay, "err", herr)
		_ = m.NakWithDelay(delay)
	}
}

// beat extends d's ack deadline every Heartbeat until the returned func is called,
// which returns once the beating has stopped (no InProgress follows an ack).
func (s ConsumerSpec) beat(d Delivery) (stop func()) {
	if s.Heartbeat <= 0 {
		return func() {}
	}
	done, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		t := time.NewTicker(s.Heartbeat)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				_ = d.InProgress()
			}
		}
	}()
	return func() {
		close(done)
		<-stopped
	}
}

// backoff grows 100ms, 200ms, 400ms ... up to 10s.
func backoff(delivered uint64) time.Duration {
	d := 100 * time.Millisecond
	for i := uint64(1); i < delivered && d < 10*time.Second; i++ {
		d *= 2
	}
	return min(d, 10*time.Second)
}
