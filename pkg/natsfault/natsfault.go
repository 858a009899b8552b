// Package natsfault wraps a jetstream.JetStream so that a share of its calls fail the
// way a flaky network or server makes them fail: a publish that never reaches the
// stream (the caller sees no answer), a publish whose acknowledgement is lost (the
// message is stored; the caller sees a timeout), and a consumer's ack that fails (the
// server redelivers the message). It serves the fault tests (R10); it owns nothing else
// and changes nothing that is not one of those faults.
package natsfault

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// ErrInjected marks every failure the wrapper made up.
var ErrInjected = errors.New("natsfault: injected fault")

// Rates are the share (0 to 1) of calls that fail, per kind of fault.
type Rates struct {
	PublishError float64 // a publish is dropped before the stream sees it
	LostAck      float64 // a publish is stored but its acknowledgement is lost
	AckError     float64 // a consumer's ack fails and is not sent
}

// Counts are the faults injected so far.
type Counts struct {
	PublishErrors int64 `json:"publish_errors"`
	LostAcks      int64 `json:"lost_acks"`
	AckErrors     int64 `json:"ack_errors"`
}

// Total is every fault injected.
func (c Counts) Total() int64 { return c.PublishErrors + c.LostAcks + c.AckErrors }

// Injector decides which calls fail, and counts them. It is safe for concurrent use.
type Injector struct {
	rates                              Rates
	mu                                 sync.Mutex
	rnd                                *rand.Rand
	publishErrors, lostAcks, ackErrors atomic.Int64
}

// New returns an injector with the given rates; seed makes its choices repeatable.
func New(rates Rates, seed uint64) *Injector {
	return &Injector{rates: rates, rnd: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
}

// Counts is a snapshot of the faults injected so far.
func (in *Injector) Counts() Counts {
	return Counts{PublishErrors: in.publishErrors.Load(), LostAcks: in.lostAcks.Load(), AckErrors: in.ackErrors.Load()}
}

func (in *Injector) hit(rate float64) bool {
	if rate <= 0 {
		return false
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.rnd.Float64() < rate
}

// publishFault is what happens to one publish: nothing, dropped, or stored unacknowledged.
func (in *Injector) publishFault() (dropped, unacked bool) {
	switch {
	case in.hit(in.rates.PublishError):
		in.publishErrors.Add(1)
		return true, false
	case in.hit(in.rates.LostAck):
		in.lostAcks.Add(1)
		return false, true
	}
	return false, false
}

// PublishFault is the fate of one publish that does not go through a wrapped client (an
// events.Store's own appends, events.WithPublishFaults): dropped before any server
// sees it, or stored with its acknowledgement lost. Each is counted as the wrapper
// counts its own.
func (in *Injector) PublishFault() (dropped, unacked bool) { return in.publishFault() }

// Wrap returns js with the injector's faults.
func (in *Injector) Wrap(js jetstream.JetStream) jetstream.JetStream {
	return &faultyJS{JetStream: js, in: in}
}

// dropped is the error of a publish the stream never saw: no answer, as JetStream says.
func dropped() error {
	return fmt.Errorf("%w (publish dropped): %w", ErrInjected, jetstream.ErrNoStreamResponse)
}

// unacked is the error of a stored publish whose acknowledgement was lost.
func unacked() error {
	return fmt.Errorf("%w (acknowledgement lost): %w", ErrInjected, nats.ErrTimeout)
}

type faultyJS struct {
	jetstream.JetStream
	in *Injector
}

func (j *faultyJS) Publish(ctx context.Context, subj string, data []byte, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	return j.PublishMsg(ctx, &nats.Msg{Subject: subj, Data: data}, opts...)
}

func (j *faultyJS) PublishMsg(ctx context.Context, m *nats.Msg, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	drop, lose := j.in.publishFault()
	if drop {
		return nil, dropped()
	}
	ack, err := j.JetStream.PublishMsg(ctx, m, opts...)
	if err == nil && lose {
		return nil, unacked()
	}
	return ack, err
}

func (j *faultyJS) PublishAsync(subj string, data []byte, opts ...jetstream.PublishOpt) (jetstream.PubAckFuture, error) {
	return j.PublishMsgAsync(&nats.Msg{Subject: subj, Data: data}, opts...)
}

func (j *faultyJS) PublishMsgAsync(m *nats.Msg, opts ...jetstream.PublishOpt) (jetstream.PubAckFuture, error) {
	drop, lose := j.in.publishFault()
	if drop {
		return nil, dropped()
	}
	f, err := j.JetStream.PublishMsgAsync(m, opts...)
	if err != nil || !lose {
		return f, err
	}
	return lostFuture(f), nil
}

// lostFuture resolves as a timeout once the real publish has been answered, whatever
// the answer was.
func lostFuture(f jetstream.PubAckFuture) jetstream.PubAckFuture {
	errc := make(chan error, 1)
	go func() {
		select {
		case <-f.Ok():
		case <-f.Err():
		}
		errc <- unacked()
	}()
	return &future{PubAckFuture: f, err: errc}
}

type future struct {
	jetstream.PubAckFuture
	err chan error
}

func (f *future) Ok() <-chan *jetstream.PubAck { return nil }
func (f *future) Err() <-chan error            { return f.err }

func (j *faultyJS) CreateOrUpdateConsumer(ctx context.Context, stream string, cfg jetstream.ConsumerConfig) (jetstream.Consumer, error) {
	c, err := j.JetStream.CreateOrUpdateConsumer(ctx, stream, cfg)
	if err != nil {
		return c, err
	}
	return &faultyConsumer{Consumer: c, in: j.in}, nil
}

type faultyConsumer struct {
	jetstream.Consumer
	in *Injector
}

func (c *faultyConsumer) Messages(opts ...jetstream.PullMessagesOpt) (jetstream.MessagesContext, error) {
	it, err := c.Consumer.Messages(opts...)
	if err != nil {
		return it, err
	}
	return &faultyMessages{MessagesContext: it, in: c.in}, nil
}

type faultyMessages struct {
	jetstream.MessagesContext
	in *Injector
}

func (m *faultyMessages) Next(opts ...jetstream.NextOpt) (jetstream.Msg, error) {
	msg, err := m.MessagesContext.Next(opts...)
	if err != nil {
		return msg, err
	}
	return &faultyMsg{Msg: msg, in: m.in}, nil
}

type faultyMsg struct {
	jetstream.Msg
	in *Injector
}

// Ack fails without acknowledging now and then: the server redelivers after AckWait.
func (m *faultyMsg) Ack() error {
	if m.in.hit(m.in.rates.AckError) {
		m.in.ackErrors.Add(1)
		return fmt.Errorf("%w (ack not sent): %w", ErrInjected, nats.ErrTimeout)
	}
	return m.Msg.Ack()
}
