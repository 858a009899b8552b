package property

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// hub is this process's one watch of the live view, fanned out to the tasks that watch
// through it: a thousand watching tasks cost one KV watcher, not a thousand.
type hub struct {
	mu     sync.Mutex
	latest map[string]map[string]Entry // by session, then bucket key: as the watch last delivered
	subs   map[string]map[*sub]bool    // by session
	ready  chan struct{}               // closed once the first snapshot is in
	once   sync.Once
	// changed is closed (and replaced) whenever an entry is recorded.
	changed chan struct{}
}

// sub is one watching task's queue. A task that falls 256 entries behind is cut off
// (closed), and resumes from the last sequence it saw (SSE's Last-Event-ID).
type sub struct {
	ch  chan Entry
	cut bool
}

func newHub() *hub {
	return &hub{latest: map[string]map[string]Entry{}, subs: map[string]map[*sub]bool{}, ready: make(chan struct{}),
		changed: make(chan struct{})}
}

// run watches bucket until ctx ends, starting again after a failure.
func (h *hub) run(ctx context.Context, js jetstream.JetStream, name string, log *slog.Logger) {
	wait := 250 * time.Millisecond
	for {
		err := h.watch(ctx, js, name)
		if ctx.Err() != nil {
			return
		}
		log.Warn("property watch stopped; starting again", "bucket", name, "in", wait, "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(wait*2, 5*time.Second)
	}
}

func (h *hub) watch(ctx context.Context, js jetstream.JetStream, name string) error {
	kv, err := bucket(ctx, js, name)
	if err != nil {
		return err
	}
	w, err := kv.WatchAll(ctx)
	if err != nil {
		return err
	}
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case entry, ok := <-w.Updates():
			if !ok {
				return errors.New("the watch ended")
			}
			if entry == nil {
				h.once.Do(func() { close(h.ready) })
				continue
			}
			if entry.Key() == MetaKey {
				continue
			}
			if entry.Operation() != jetstream.KeyValuePut {
				h.forget(entry.Key())
				continue
			}
			if en, err := decodeEntry(entry.Value()); err == nil {
				h.publish(entry.Key(), en)
			}
		}
	}
}

// publish records an entry and hands it to the session's watchers.
func (h *hub) publish(key string, en Entry) {
	h.mu.Lock()
	defer h.mu.Unlock()
	m := h.latest[en.Session]
	if m == nil {
		m = map[string]Entry{}
		h.latest[en.Session] = m
	}
	if old, ok := m[key]; ok && old.Seq >= en.Seq {
		return
	}
	en.event = &sseEvent{}
	m[key] = en
	close(h.changed)
	h.changed = make(chan struct{})
	for s := range h.subs[en.Session] {
		select {
		case s.ch <- en:
		default:
			h.cutLocked(en.Session, s)
		}
	}
}

// forget drops a key the view purged (its session ended); its watchers are told nothing.
func (h *hub) forget(key string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := sessionOfKey(key)
	delete(h.latest[s], key)
	if len(h.latest[s]) == 0 {
		delete(h.latest, s)
	}
}

// subscribe returns a queue of the session's entries set from now on, and the entries
// already set (each at most once in the two together, by sequence, is the caller's to
// ensure).
func (h *hub) subscribe(session string) (*sub, []Entry) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := &sub{ch: make(chan Entry, 256)}
	if h.subs[session] == nil {
		h.subs[session] = map[*sub]bool{}
	}
	h.subs[session][s] = true
	return s, h.snapshotLocked(session)
}

// snapshot returns the session's entries, in the order they were set.
func (h *hub) snapshot(session string) []Entry {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.snapshotLocked(session)
}

func (h *hub) snapshotLocked(session string) []Entry {
	now := make([]Entry, 0, len(h.latest[session]))
	for _, en := range h.latest[session] {
		now = append(now, en)
	}
	slices.SortFunc(now, func(a, b Entry) int { return cmp.Compare(a.Seq, b.Seq) })
	return now
}

// wait returns once the entry at key reflects sequence seq or later, false if ctx
// ended first.
func (h *hub) wait(ctx context.Context, session, key string, seq uint64) bool {
	for {
		h.mu.Lock()
		got, changed := h.latest[session][key].Seq, h.changed
		h.mu.Unlock()
		if got >= seq {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-changed:
		}
	}
}

func (h *hub) unsubscribe(session string, s *sub) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.cutLocked(session, s)
}

func (h *hub) cutLocked(session string, s *sub) {
	if s.cut {
		return
	}
	s.cut = true
	close(s.ch)
	delete(h.subs[session], s)
	if len(h.subs[session]) == 0 {
		delete(h.subs, session)
	}
}
