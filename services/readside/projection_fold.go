package readside

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"

	"github.com/gridwire/gridwire/events"
)

// The job table keeps a few fields of two large payloads: of a submitted event's job its
// ID, name, kind, parent, submitter, restarts, path and collection (the canonical job is
// kilobytes, and its strict decoder costs tens of microseconds), and of an incarnated
// event the cluster and queue (the payload carries every rendered script). A replay
// folds every event of the log, and decoding those two payloads whole was most of its
// cost.
//
// So the table folds such an event as the same event carrying only the fields it keeps:
// the fold (events.Apply, with every check of the state machine) sees the payload reduced
// to them and gives the row the whole payload would give, since the row drops the rest.
// The reduction reads the payload's top level (and that of the job's original and dds
// objects); whatever it does not read plainly (a key with an escape, a key that matches a
// kept one only in another case, which encoding/json would take for it, a payload that
// is not an object) goes to the fold whole. The reduced payload is judged as the whole
// one is (types, the job ID against the subject); what the row does not keep is not
// judged here. The store decodes a job whole before appending it, so only an event
// written around the store can differ there, and `gridwire audit verify` decodes every
// payload whole.

// field is a payload field the table keeps, or the fields it keeps of an object.
type field struct {
	name string
	sub  []field
}

// keptFields are the payload fields the table keeps, by event name: of a job also its
// place in its document and its DDS collection, which a job's view shows.
var keptFields = map[events.Name][]field{
	events.Submitted: {{name: "id"}, {name: "name"}, {name: "kind"}, {name: "parent"}, {name: "submitter"}, {name: "restarts"},
		{name: "original", sub: []field{{name: "path"}}}, {name: "dds", sub: []field{{name: "collection_path"}}}},
	events.Incarnated: {{name: "cluster"}, {name: "queue"}},
}

// foldRow applies e to a row and compacts the result; the fold starts from the row's job
// filled into scratch, so it allocates no job of its own.
func foldRow(old row, e events.Event, scratch *events.Job) (row, error) {
	next, err := applyRow(old.foldState(scratch), e)
	if err != nil {
		return row{}, err
	}
	return old.next(next), nil
}

// replayApply folds one event of a replay into t, as Apply does, for shards that each
// fold jobs of their own: a job's row cannot move between reading and writing it, so it
// is read and written once, and the counts and the order of the table are made once at
// the end (finishReplay) instead of at every event. A new row keeps a job ID of its own:
// the event's may share the bytes of its stream subject (events.DecodeFold).
func (t *Table) replayApply(e events.Event, scratch *events.Job) error {
	t.mu.RLock()
	old, ok := t.rows[e.JobID]
	t.mu.RUnlock()
	if ok && e.Seq != 0 && e.Seq <= old.seq() {
		return nil
	}
	next, err := foldRow(old, e, scratch)
	if err != nil {
		return err
	}
	if !ok {
		next.id = strings.Clone(next.id)
	}
	t.mu.Lock()
	t.rows[next.id] = next
	t.mu.Unlock()
	return nil
}

// finishReplay makes the order and the counts of a table replayApply filled, and stamps
// it with seq.
func (t *Table) finishReplay(seq uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.order = make([]string, 0, len(t.rows))
	clear(t.counts)
	for id, r := range t.rows {
		t.order = append(t.order, id)
		t.count(&r, 1)
	}
	slices.Sort(t.order)
	t.seq = max(t.seq, seq)
}

// applyRow folds e into a row's state as events.Apply folds it into a whole state,
// reading of the large payloads only the fields the row keeps.
func applyRow(from events.State, e events.Event) (events.State, error) {
	if keep, ok := keptFields[e.Name]; ok {
		if data, ok := reduce(e.Data, keep); ok {
			e.Data = data
		}
	}
	return events.Apply(from, e)
}

// reduce returns the JSON object of payload's fields named in keep (the last of a
// repeated one, as encoding/json takes it), or false when the payload is not valid JSON
// or not in the plain shape described above. It reads the payload once, checking it as
// it goes (the values it skips by events.JSONValueEnd, json.Valid's grammar); it may
// send to the whole decode what encoding/json would accept (an escaped key), never the
// reverse.
func reduce(payload []byte, keep []field) (json.RawMessage, bool) {
	i := skipWS(payload, 0)
	out, end, ok := reduceObject(payload, i, keep)
	if !ok || skipWS(payload, end) != len(payload) {
		return nil, false
	}
	return out, true
}

// reduceObject reduces the object at b[i] to the fields of keep and returns the index
// after it.
func reduceObject(b []byte, i int, keep []field) (json.RawMessage, int, bool) {
	if i >= len(b) || b[i] != '{' {
		return nil, i, false
	}
	vals := make([][]byte, len(keep))
	i = skipWS(b, i+1)
	for first := true; ; first = false {
		if first && i < len(b) && b[i] == '}' {
			i++
			break
		}
		end, ok := events.JSONStringEnd(b, i)
		if !ok {
			return nil, i, false
		}
		key := b[i+1 : end-1]
		if bytes.IndexByte(key, '\\') >= 0 {
			return nil, i, false
		}
		if i = skipWS(b, end); i >= len(b) || b[i] != ':' {
			return nil, i, false
		}
		i = skipWS(b, i+1)
		k, exact := keptIndex(key, keep)
		if k >= 0 && !exact {
			return nil, i, false // a kept field spelt in another case
		}
		var vend int
		switch {
		case k >= 0 && keep[k].sub != nil && i < len(b) && b[i] == '{':
			vals[k], vend, ok = reduceObject(b, i, keep[k].sub)
		default:
			vend, ok = events.JSONValueEnd(b, i)
			if k >= 0 {
				vals[k] = b[i:vend]
			}
		}
		if !ok {
			return nil, i, false
		}
		if i = skipWS(b, vend); i < len(b) && b[i] == ',' {
			i = skipWS(b, i+1)
			continue
		}
		if i < len(b) && b[i] == '}' {
			i++
			break
		}
		return nil, i, false
	}
	return reduced(keep, vals), i, true
}

// reduced writes the object of the kept fields found.
func reduced(keep []field, vals [][]byte) json.RawMessage {
	n := 2
	for k, v := range vals {
		n += len(keep[k].name) + len(v) + 4
	}
	out := make([]byte, 0, n)
	out = append(out, '{')
	for k, v := range vals {
		if v == nil {
			continue
		}
		if len(out) > 1 {
			out = append(out, ',')
		}
		out = append(out, '"')
		out = append(out, keep[k].name...)
		out = append(out, '"', ':')
		out = append(out, v...)
	}
	return append(out, '}')
}

// keptIndex finds key among keep: its index and true when spelt exactly, its index and
// false when it matches only under case folding, -1 when it is none of them.
func keptIndex(key []byte, keep []field) (int, bool) {
	for k, f := range keep {
		if string(key) == f.name {
			return k, true
		}
	}
	for k, f := range keep {
		if strings.EqualFold(string(key), f.name) {
			return k, false
		}
	}
	return -1, false
}

func skipWS(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\n' || b[i] == '\t' || b[i] == '\r') {
		i++
	}
	return i
}
