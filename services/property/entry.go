package property

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/gridwire/gridwire/events"
)

// Bucket is the KV bucket of the live view: one entry per session, scope instance and
// key (EntryKey), the last value set, and MetaKey, the stream sequence it reflects.
const Bucket = "gridwire-properties"

// MetaKey is the projection's stamp: every property_set up to its sequence is in.
const MetaKey = "meta"

// Entry is one property's current value in a session, as the live view keeps it.
type Entry struct {
	Session string `json:"session"`
	events.PropertySetData
	Seq  uint64    `json:"seq"`  // stream sequence of the property_set that set it
	Time time.Time `json:"time"` // when it was set

	// event is the entry's SSE event, encoded once for every task it is sent to (set
	// by the hub; nil on an entry read otherwise).
	event *sseEvent
}

// sseEvent is an entry as a server-sent event, encoded on first use.
type sseEvent struct {
	once sync.Once
	b    []byte
	err  error
}

// sse returns the entry's server-sent event.
func (en Entry) sse() ([]byte, error) {
	if en.event == nil {
		return encodeSSE(en)
	}
	en.event.once.Do(func() { en.event.b, en.event.err = encodeSSE(en) })
	return en.event.b, en.event.err
}

func encodeSSE(en Entry) ([]byte, error) {
	b, err := json.Marshal(valueOf(en))
	if err != nil {
		return nil, err
	}
	return fmt.Appendf(nil, "id: %d\nevent: property\ndata: %s\n\n", en.Seq, b), nil
}

// Meta is the projection's stamp.
type Meta struct {
	Seq uint64 `json:"seq"`
}

// EntryKey is where a value lives in Bucket: <session>.g.<key> for a global property,
// <session>.c.<collection instance path>.<key> for a collection-scoped one, each name
// escaped to the characters a KV key allows.
func EntryKey(session string, d events.PropertySetData) string {
	if d.Scope == events.ScopeCollection {
		return session + ".c." + escape(d.Collection) + "." + escape(d.Key)
	}
	return session + ".g." + escape(d.Key)
}

// escape keeps a-z A-Z 0-9 _ - / and writes any other byte as =XX, so DDS's names (#, @,
// ~) and paths fit a KV key token.
func escape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '/' {
			b.WriteByte(c)
			continue
		}
		fmt.Fprintf(&b, "=%02X", c)
	}
	return b.String()
}

// entryOf is the live view's entry a stored property_set makes, or why it makes none.
func entryOf(e events.Event) (Entry, error) {
	var d events.PropertySetData
	if err := e.Payload(&d); err != nil {
		return Entry{}, err
	}
	if err := d.Check(); err != nil {
		return Entry{}, err
	}
	return Entry{Session: e.JobID, PropertySetData: d, Seq: e.Seq, Time: e.Time}, nil
}

func decodeEntry(b []byte) (Entry, error) {
	var en Entry
	err := json.Unmarshal(b, &en)
	return en, err
}
