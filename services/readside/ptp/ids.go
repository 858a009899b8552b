package ptp

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/gridwire/gridwire/events"
	"github.com/nats-io/nats.go/jetstream"
)

// IDBucket is the KV bucket that maps gridwire's names (jobs, clusters, queues, hosts) to
// element ID offsets. A session's element IDs are its base ID plus these offsets, so a
// client that reconnects with the same base ID sees the same ID for the same job. A
// job's processes take the offsets right after its own.
//
// It is the one piece of PTP state that the log cannot rebuild as it was: losing the
// bucket renumbers elements (clients treat IDs as opaque per session), it loses no job.
const IDBucket = "gridwire-ptp-ids"

// MaxOffset keeps base+offset within a Java int for any base below 2^30.
const MaxOffset = 1<<30 - 1

const (
	counterKey = "next"
	blockSize  = 4096
)

// ids allocates offsets. Processes of several gridwire instances share the bucket: a
// block of offsets is claimed by compare-and-set on the counter, and a name's offset is
// fixed by the first Create of its key.
type ids struct {
	kv jetstream.KeyValue

	mu        sync.Mutex
	known     map[string]uint32 // key → offset
	blockNext uint32
	blockEnd  uint32
}

func openIDs(ctx context.Context, js jetstream.JetStream) (*ids, error) {
	replicas, err := events.Replicas(ctx, js) // as many copies as the log keeps
	if err != nil {
		return nil, err
	}
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: IDBucket,
		Description: "PTP element ID offsets of gridwire's jobs, clusters, queues and hosts", Storage: jetstream.FileStorage,
		Replicas: replicas})
	if err != nil {
		return nil, fmt.Errorf("ptp: opening %s: %w", IDBucket, err)
	}
	i := &ids{kv: kv, known: map[string]uint32{}}
	return i, i.load(ctx)
}

func (i *ids) load(ctx context.Context) error {
	w, err := i.kv.WatchAll(ctx, jetstream.IgnoreDeletes())
	if err != nil {
		return fmt.Errorf("ptp: reading %s: %w", IDBucket, err)
	}
	defer func() { _ = w.Stop() }()
	for entry := range w.Updates() {
		if entry == nil {
			return nil
		}
		if off, ok := parseOffset(entry.Value()); ok && entry.Key() != counterKey {
			i.known[entry.Key()] = off
		}
	}
	return ctx.Err()
}

func parseOffset(b []byte) (uint32, bool) {
	s, _, _ := strings.Cut(string(b), ",")
	n, err := strconv.ParseUint(s, 10, 32)
	return uint32(n), err == nil && n <= MaxOffset
}

// nameKey is the key of a named element: its kind and the hex of its name (KV keys
// allow few characters; host names and queues may use others).
func nameKey(kind string, parts ...string) string {
	return kind + "." + hex.EncodeToString([]byte(strings.Join(parts, "\x00")))
}

// job returns the offset of a job with procs processes, allocating it on first sight.
func (i *ids) job(ctx context.Context, jobID string, procs int) (uint32, error) {
	return i.offset(ctx, "j."+jobID, 1+procs)
}

// named returns the offset of a cluster, queue or host.
func (i *ids) named(ctx context.Context, kind string, parts ...string) (uint32, error) {
	return i.offset(ctx, nameKey(kind, parts...), 1)
}

func (i *ids) offset(ctx context.Context, key string, n int) (uint32, error) {
	i.mu.Lock()
	defer i.mu.Unlock()
	if off, ok := i.known[key]; ok {
		return off, nil
	}
	// Not read first: another process naming it since load is rare, and Create says so.
	off, err := i.claim(ctx, n)
	if err != nil {
		return 0, err
	}
	if _, err := i.kv.Create(ctx, key, []byte(strconv.FormatUint(uint64(off), 10)+","+strconv.Itoa(n))); err != nil {
		if e, gerr := i.kv.Get(ctx, key); gerr == nil { // another process named it first
			if theirs, ok := parseOffset(e.Value()); ok {
				i.known[key] = theirs
				return theirs, nil
			}
		}
		return 0, fmt.Errorf("ptp: recording %s: %w", key, err)
	}
	i.known[key] = off
	return off, nil
}

// claim takes n consecutive offsets from the current block, claiming a new block from
// the shared counter when it runs out. Offset 0 is never used: it is the base ID itself.
func (i *ids) claim(ctx context.Context, n int) (uint32, error) {
	if uint64(i.blockNext)+uint64(n) <= uint64(i.blockEnd) && i.blockNext > 0 {
		off := i.blockNext
		i.blockNext += uint32(n)
		return off, nil
	}
	size := uint32(max(blockSize, n))
	for attempt := 0; attempt < 64; attempt++ {
		start, rev, err := i.counter(ctx)
		if err != nil {
			return 0, err
		}
		if uint64(start)+uint64(size) > MaxOffset {
			return 0, fmt.Errorf("ptp: element ID offsets exhausted at %d", start)
		}
		val := []byte(strconv.FormatUint(uint64(start+size), 10))
		if rev == 0 {
			_, err = i.kv.Create(ctx, counterKey, val)
		} else {
			_, err = i.kv.Update(ctx, counterKey, val, rev)
		}
		if err == nil {
			i.blockNext, i.blockEnd = start+uint32(n), start+size
			return start, nil
		}
	}
	return 0, fmt.Errorf("ptp: claiming element IDs: the counter kept changing")
}

func (i *ids) counter(ctx context.Context) (uint32, uint64, error) {
	e, err := i.kv.Get(ctx, counterKey)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return 1, 0, nil
	}
	if err != nil {
		return 0, 0, fmt.Errorf("ptp: reading the ID counter: %w", err)
	}
	n, err := strconv.ParseUint(string(e.Value()), 10, 32)
	if err != nil || n == 0 {
		return 0, 0, fmt.Errorf("ptp: ID counter holds %q", e.Value())
	}
	return uint32(n), e.Revision(), nil
}
