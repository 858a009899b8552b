package property

import (
	"context"
	"errors"
	"fmt"
	"reflect"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/pkg/bus"
	"github.com/nats-io/nats.go/jetstream"
)

// View is a live view in memory: entries by their key in Bucket.
type View map[string]Entry

// Rebuild folds every property_set of the log, from its first event to the last one
// stored when it starts, into a fresh view, and writes it to bucket when bucket is not
// empty (emptied first). It returns the view and the stream sequence it reflects.
func Rebuild(ctx context.Context, js jetstream.JetStream, bucketName string) (View, uint64, error) {
	stream, err := js.Stream(ctx, events.Stream)
	if err != nil {
		return nil, 0, fmt.Errorf("rebuilding properties: %w", err)
	}
	info, err := stream.Info(ctx)
	if err != nil {
		return nil, 0, fmt.Errorf("rebuilding properties: %w", err)
	}
	upTo := info.State.LastSeq
	view, err := readView(ctx, js, upTo)
	if err != nil || bucketName == "" {
		return view, upTo, err
	}
	return view, upTo, writeView(ctx, js, bucketName, view, upTo)
}

// readView folds the property_set events up to sequence upTo, and drops the entries of
// each session that ended, as the live view does.
func readView(ctx context.Context, js jetstream.JetStream, upTo uint64) (View, error) {
	view, keys := View{}, map[string]map[string]bool{}
	if upTo == 0 {
		return view, nil
	}
	cons, err := js.OrderedConsumer(ctx, events.Stream, jetstream.OrderedConsumerConfig{
		FilterSubjects: viewFilters()})
	if err != nil {
		return nil, fmt.Errorf("rebuilding properties: %w", err)
	}
	defer bus.Forget(ctx, bus.OfStream(js, events.Stream), cons)
	info, err := cons.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("rebuilding properties: %w", err)
	}
	for pending := info.NumPending; pending > 0; {
		batch, err := cons.Fetch(int(min(pending, 1024)))
		if err != nil {
			return nil, fmt.Errorf("rebuilding properties: %w", err)
		}
		for m := range batch.Messages() {
			pending--
			foldView(view, keys, m, upTo)
		}
		if err := batch.Error(); err != nil {
			return nil, fmt.Errorf("rebuilding properties: %w", err)
		}
	}
	return view, nil
}

// foldView folds one message of the view's filters into view (keys: its keys by
// session), if it was stored up to sequence upTo.
func foldView(view View, keys map[string]map[string]bool, m jetstream.Msg, upTo uint64) {
	if id, name, _, err := events.ParseSubject(m.Subject()); err == nil && ends(name) {
		if meta, err := m.Metadata(); err == nil && meta.Sequence.Stream <= upTo {
			for k := range keys[id] {
				delete(view, k)
			}
			delete(keys, id)
		}
		return
	}
	e, err := stored(m)
	if err != nil || e.Seq > upTo {
		return
	}
	if en, err := entryOf(e); err == nil {
		k := EntryKey(en.Session, en.PropertySetData)
		view[k] = en
		addKey(keys, k)
	}
}

func writeView(ctx context.Context, js jetstream.JetStream, name string, view View, upTo uint64) error {
	if err := js.DeleteKeyValue(ctx, name); err != nil && !errors.Is(err, jetstream.ErrBucketNotFound) {
		return fmt.Errorf("emptying %s: %w", name, err)
	}
	kv, err := bucket(ctx, js, name)
	if err != nil {
		return err
	}
	for _, en := range view {
		if err := put(ctx, kv, en); err != nil {
			return err
		}
	}
	return putMeta(ctx, kv, upTo)
}

// Load reads a live-view bucket into memory, with its stamp.
func Load(ctx context.Context, js jetstream.JetStream, name string) (View, uint64, error) {
	kv, err := js.KeyValue(ctx, name)
	if err != nil {
		return nil, 0, fmt.Errorf("property view %s: %w", name, err)
	}
	w, err := kv.WatchAll(ctx, jetstream.IgnoreDeletes())
	if err != nil {
		return nil, 0, fmt.Errorf("property view %s: %w", name, err)
	}
	defer w.Stop()
	view, seq := View{}, uint64(0)
	for entry := range w.Updates() {
		if entry == nil {
			break
		}
		if entry.Key() == MetaKey {
			if seq, err = stamp(ctx, kv); err != nil {
				return nil, 0, err
			}
			continue
		}
		en, err := decodeEntry(entry.Value())
		if err != nil {
			return nil, 0, fmt.Errorf("property view %s, key %s: %w", name, entry.Key(), err)
		}
		view[entry.Key()] = en
	}
	return view, seq, nil
}

// Difference is one key whose entry differs between the live view and a rebuild.
type Difference struct {
	Key     string `json:"key"`
	Live    *Entry `json:"live,omitempty"`    // nil: missing from the live view
	Rebuilt *Entry `json:"rebuilt,omitempty"` // nil: missing from the rebuild
}

// Comparison is the result of Compare.
type Comparison struct {
	LiveSeq     uint64       `json:"live_seq"`    // the live view's stamp
	Keys        int          `json:"keys"`        // entries of the rebuild
	Behind      int          `json:"behind"`      // entries the live view has not caught up with yet
	Differences []Difference `json:"differences"` // entries that differ where both saw the same events
}

// Compare checks the live view in bucket against a view rebuilt from the log up to
// sequence upTo. An entry is compared where both saw the same events: a live entry set
// after upTo has moved on since the rebuild read the log, and a rebuilt entry set after
// the live view's stamp may not be folded there yet (behind, not wrong, when absent or
// older), as a live entry of a session that ended after that stamp may not be purged
// yet. Every other entry must be identical, and present on both sides.
func Compare(ctx context.Context, js jetstream.JetStream, bucketName string, rebuilt View, upTo uint64) (Comparison, error) {
	live, liveSeq, err := Load(ctx, js, bucketName)
	if err != nil {
		return Comparison{}, err
	}
	c := Comparison{LiveSeq: liveSeq, Keys: len(rebuilt), Differences: []Difference{}}
	for k, r := range rebuilt {
		l, ok := live[k]
		switch {
		case ok && l.Seq > upTo:
		case r.Seq > liveSeq && (!ok || l.Seq < r.Seq):
			c.Behind++
		case !ok:
			c.Differences = append(c.Differences, Difference{Key: k, Rebuilt: &r})
		case !reflect.DeepEqual(normal(l), normal(r)):
			c.Differences = append(c.Differences, Difference{Key: k, Live: &l, Rebuilt: &r})
		}
	}
	ended := map[string]uint64{} // by session: the stream sequence of its end, 0 for none
	for k, l := range live {
		if _, ok := rebuilt[k]; ok || l.Seq > upTo {
			continue
		}
		end, ok := ended[l.Session]
		if !ok {
			if end, err = sessionEnd(ctx, js, l.Session); err != nil {
				return Comparison{}, err
			}
			ended[l.Session] = end
		}
		if end > liveSeq && end <= upTo {
			c.Behind++
			continue
		}
		c.Differences = append(c.Differences, Difference{Key: k, Live: &l})
	}
	return c, nil
}

// sessionEnd is the stream sequence of the event that ended session, 0 while it has not.
func sessionEnd(ctx context.Context, js jetstream.JetStream, session string) (uint64, error) {
	stream, err := js.Stream(ctx, events.Stream)
	if err != nil {
		return 0, fmt.Errorf("looking for the end of session %s: %w", session, err)
	}
	var end uint64
	for _, n := range endNames {
		m, err := stream.GetLastMsgForSubject(ctx, events.Subject(session, n, "*"))
		switch {
		case errors.Is(err, jetstream.ErrMsgNotFound):
		case err != nil:
			return 0, fmt.Errorf("looking for the end of session %s: %w", session, err)
		default:
			end = max(end, m.Sequence)
		}
	}
	return end, nil
}

// normal drops the monotonic clock reading, which JSON never carries.
func normal(en Entry) Entry {
	en.Time = en.Time.UTC().Round(0)
	return en
}
