package property

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
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
// as it is read (a reader waits on it), the stamp every flush interval. When a session
// ends, its entries are purged: nobody may read them any more (its tasks have ended, and
// their credentials with them), and the log keeps every value for whoever replays it.
type projector struct {
	kv      jetstream.KeyValue
	log     *slog.Logger
	every   time.Duration
	folded  uint64
	written uint64
	// keys are the view's keys by session, to purge when the session ends: read from the
	// bucket at start, then kept with each entry written. A job's end that is not a
	// session's with entries costs a map lookup.
	keys map[string]map[string]bool
}

// endNames are the events that end a job: on a session's own record, the session's end.
var endNames = []events.Name{events.Succeeded, events.Failed, events.Cancelled}

// viewFilters are the events the view folds: property sets and the ends of sessions.
func viewFilters() []string {
	f := []string{events.TypeFilter(events.PropertySet, "")}
	for _, n := range endNames {
		f = append(f, events.TypeFilter(n, ""))
	}
	return f
}

// ends reports whether name ends a job.
func ends(name events.Name) bool {
	return name == events.Succeeded || name == events.Failed || name == events.Cancelled
}

// sessionOfKey is the session an entry's key belongs to (EntryKey).
func sessionOfKey(key string) string {
	s, _, _ := strings.Cut(key, ".")
	return s
}

// loadKeys reads the bucket's keys by session.
func loadKeys(ctx context.Context, kv jetstream.KeyValue) (map[string]map[string]bool, error) {
	keys := map[string]map[string]bool{}
	lister, err := kv.ListKeys(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing the keys of %s: %w", kv.Bucket(), err)
	}
	defer func() { _ = lister.Stop() }()
	for k := range lister.Keys() {
		if k != MetaKey {
			addKey(keys, k)
		}
	}
	return keys, nil
}

func addKey(keys map[string]map[string]bool, key string) {
	s := sessionOfKey(key)
	if keys[s] == nil {
		keys[s] = map[string]bool{}
	}
	keys[s][key] = true
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
	if p.keys, err = loadKeys(ctx, kv); err != nil {
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

// propertySets reads the log's property_set events and job ends from stream sequence
// from on.
func propertySets(ctx context.Context, js jetstream.JetStream, from uint64) (jetstream.MessagesContext, error) {
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: viewFilters(),
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

// fold writes one property_set's entry (one the fold would refuse is left out), or
// purges the entries of a session that ended.
func (p *projector) fold(ctx context.Context, m jetstream.Msg) error {
	if id, name, _, err := events.ParseSubject(m.Subject()); err == nil && ends(name) {
		return p.end(ctx, m, id)
	}
	e, err := stored(m)
	if err != nil {
		p.log.Warn("stream message left out of the property view", "subject", m.Subject(), "err", err)
		return nil
	}
	if en, err := entryOf(e); err != nil {
		p.log.Warn("property_set left out of the property view", "job", e.JobID, "seq", e.Seq, "err", err)
	} else {
		if err := putNewer(ctx, p.kv, en); err != nil {
			return err
		}
		addKey(p.keys, EntryKey(en.Session, en.PropertySetData))
	}
	p.folded = max(p.folded, e.Seq)
	return nil
}

// end purges the entries of job id when it is a session the view holds entries of.
// Each purge leaves an empty marker in place of the key's values. A projector that is
// behind may write a session's entry again after another purged it; it purges it again
// when it reaches the session's end.
func (p *projector) end(ctx context.Context, m jetstream.Msg, id string) error {
	meta, err := m.Metadata()
	if err != nil {
		return err
	}
	for key := range p.keys[id] {
		if err := p.kv.Purge(ctx, key); err != nil {
			return fmt.Errorf("purging property %s of ended session %s: %w", key, id, err)
		}
	}
	delete(p.keys, id)
	p.folded = max(p.folded, meta.Sequence.Stream)
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
