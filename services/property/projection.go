package property

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/pkg/bus"
	"github.com/nats-io/nats.go/jetstream"
)

// bucket opens (creating when needed) a live-view bucket, with as many replicas as the
// log keeps, as every projection bucket has.
func bucket(ctx context.Context, js jetstream.JetStream, name string) (jetstream.KeyValue, error) {
	kv, err := events.Ensure(ctx, func(ctx context.Context) (jetstream.KeyValue, error) {
		replicas, err := events.Replicas(ctx, js)
		if err != nil {
			return nil, err
		}
		return js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: name,
			Description: "gridwire DDS session properties, projected from property_set events",
			Storage:     jetstream.FileStorage, Replicas: replicas})
	})
	if err != nil {
		return nil, fmt.Errorf("property bucket %s: %w", name, err)
	}
	return kv, nil
}

// stamp reads a bucket's MetaKey: the stream sequence it reflects (0 when new).
func stamp(ctx context.Context, kv jetstream.KeyValue) (uint64, error) {
	e, err := kv.Get(ctx, MetaKey)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("reading %s of %s: %w", MetaKey, kv.Bucket(), err)
	}
	var m Meta
	if err := json.Unmarshal(e.Value(), &m); err != nil {
		return 0, fmt.Errorf("%s of %s: %w", MetaKey, kv.Bucket(), err)
	}
	return m.Seq, nil
}

// projector keeps the live view up to date with the log: each property_set is written
// as it is read (a reader waits on it), the stamp every flush interval.
type projector struct {
	kv      jetstream.KeyValue
	log     *slog.Logger
	every   time.Duration
	folded  uint64
	written uint64
}

// runProjector maintains the live view in bucket name until ctx ends; a failure starts it
// again from the bucket's stamp after a back-off (the view can always be caught up from
// its stamp and the log).
func runProjector(ctx context.Context, js jetstream.JetStream, name string, every time.Duration, log *slog.Logger) {
	wait := 250 * time.Millisecond
	for {
		err := project(ctx, js, name, every, log)
		if ctx.Err() != nil {
			return
		}
		log.Warn("property projector stopped; starting again", "projection", name, "in", wait, "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(wait*2, 5*time.Second)
	}
}

func project(ctx context.Context, js jetstream.JetStream, name string, every time.Duration, log *slog.Logger) error {
	kv, err := bucket(ctx, js, name)
	if err != nil {
		return err
	}
	p := &projector{kv: kv, log: log, every: every}
	if p.folded, err = stamp(ctx, kv); err != nil {
		return err
	}
	p.written = p.folded
	it, err := propertySets(ctx, js, p.folded+1)
	if err != nil {
		return err
	}
	msgs, drain := bus.Feed(it, 256)
	defer drain()
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			return p.flush(fctx)
		case m, ok := <-msgs:
			if !ok {
				return errors.New("property consumer stopped")
			}
			if err := p.fold(ctx, m); err != nil {
				return err
			}
		case <-tick.C:
			if err := p.flush(ctx); err != nil {
				return err
			}
		}
	}
}

// propertySets reads the log's property_set events from stream sequence from on.
func propertySets(ctx context.Context, js jetstream.JetStream, from uint64) (jetstream.MessagesContext, error) {
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: []string{events.TypeFilter(events.PropertySet, "")},
		DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: max(from, 1)}
	cons, err := js.OrderedConsumer(ctx, events.Stream, cfg)
	if err != nil {
		return nil, fmt.Errorf("property consumer: %w", err)
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(256))
	if err != nil {
		return nil, fmt.Errorf("property consumer: %w", err)
	}
	return it, nil
}

// fold writes one property_set's entry; one the fold would refuse is left out.
func (p *projector) fold(ctx context.Context, m jetstream.Msg) error {
	e, err := stored(m)
	if err != nil {
		p.log.Warn("stream message left out of the property view", "subject", m.Subject(), "err", err)
		return nil
	}
	en, err := entryOf(e)
	if err != nil {
		p.log.Warn("property_set left out of the property view", "job", e.JobID, "seq", e.Seq, "err", err)
	} else if err := putNewer(ctx, p.kv, en); err != nil {
		return err
	}
	p.folded = max(p.folded, e.Seq)
	return nil
}

func stored(m jetstream.Msg) (events.Event, error) {
	meta, err := m.Metadata()
	if err != nil {
		return events.Event{}, err
	}
	return events.DecodeStored(m.Data(), m.Subject(), meta.Sequence.Stream)
}

func put(ctx context.Context, kv jetstream.KeyValue, en Entry) error {
	b, err := json.Marshal(en)
	if err != nil {
		return err
	}
	if _, err := kv.Put(ctx, EntryKey(en.Session, en.PropertySetData), b); err != nil {
		return fmt.Errorf("writing property %s of %s: %w", en.Key, en.Session, err)
	}
	return nil
}

// putNewer writes an entry unless the view already holds a later value of its key: with
// a compare-and-set on the key's revision, so that several read sides projecting at once
// (each at its own pace) never take a key back to an older value.
func putNewer(ctx context.Context, kv jetstream.KeyValue, en Entry) error {
	key := EntryKey(en.Session, en.PropertySetData)
	b, err := json.Marshal(en)
	if err != nil {
		return err
	}
	for range 8 {
		cur, err := kv.Get(ctx, key)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
			if _, err = kv.Create(ctx, key, b); errors.Is(err, jetstream.ErrKeyExists) {
				continue
			}
			return wrapPut(en, err)
		case err != nil:
			return wrapPut(en, err)
		}
		if old, err := decodeEntry(cur.Value()); err == nil && old.Seq >= en.Seq {
			return nil
		}
		if _, err = kv.Update(ctx, key, b, cur.Revision()); errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			continue
		}
		return wrapPut(en, err)
	}
	return wrapPut(en, errors.New("the key kept changing"))
}

func wrapPut(en Entry, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("writing property %s of %s: %w", en.Key, en.Session, err)
}

// flush writes the stamp when it moved.
func (p *projector) flush(ctx context.Context) error {
	if p.folded == p.written {
		return nil
	}
	if err := putMeta(ctx, p.kv, p.folded); err != nil {
		return err
	}
	p.written = p.folded
	return nil
}

func putMeta(ctx context.Context, kv jetstream.KeyValue, seq uint64) error {
	b, _ := json.Marshal(Meta{Seq: seq})
	if _, err := kv.Put(ctx, MetaKey, b); err != nil {
		return fmt.Errorf("writing the stamp of %s: %w", kv.Bucket(), err)
	}
	return nil
}
