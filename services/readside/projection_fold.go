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

// keptSubmitted and keptIncarnated are the payload fields the table keeps of the two
// large payloads: of a job also its place in its document and its DDS collection, which
// a job's view shows.
var (
	keptSubmitted = []field{{name: "id"}, {name: "name"}, {name: "kind"}, {name: "parent"}, {name: "submitter"}, {name: "restarts"},
		{name: "original", sub: []field{{name: "path"}}}, {name: "dds", sub: []field{{name: "collection_path"}}}}
	keptIncarnated = []field{{name: "cluster"}, {name: "queue"}}
)

// keptFields are the fields the table keeps of an event's payload, nil when it folds
// the payload whole.
func keptFields(n events.Name) []field {
	switch n {
	case events.Submitted:
		return keptSubmitted
	case events.Incarnated:
		return keptIncarnated
	}
	return nil
}

// foldRow applies e to a row and packs the result; the fold starts from the row's job
// filled into scratch, so it allocates no job of its own.
func foldRow(old row, e events.Event, scratch *events.Job) (row, error) {
	st := old.foldState(scratch)
	reduceData(&e, false)
	if err := st.Fold(&e); err != nil {
		return row{}, err
	}
	return old.next(st), nil
}

// foldingRow is a job's row while a replay's shard folds it: the state as a fold starts
// from it, unpacked, so that each event folds into it in place, with the job's fields a
// row keeps beside it instead of its whole job. A replay folds every event of the log,
// and unpacking and packing a row for each event would cost more than the fold; the
// table packs each row once, at the end (finishReplay).
type foldingRow struct {
	st     events.State // Job nil, and none of what strip drops
	hasJob bool
	job    jobSummary
}

// jobSummary is what a row keeps of its job (see row.next).
type jobSummary struct {
	id, name, parent, submitter string
	path, collection            string
	kind                        events.Kind
	restarts                    int
}

// fold folds e into the row in place (events.State.Fold, reading of the large payloads
// only the fields the row keeps); a refused event leaves it as it was. The fold starts
// from the row's job written into scratch. e's data may be replaced by its reduction;
// checked says the decoder checked it as JSON.
func (r *foldingRow) fold(e *events.Event, checked bool, scratch *events.Job) error {
	if r.hasJob {
		r.st.Job = r.job.fill(scratch)
	}
	reduceData(e, checked)
	err := r.st.Fold(e)
	if err == nil {
		r.keep()
	}
	r.st.Job = nil
	return err
}

// keep takes the job's summary from the folded state and drops what a row never shows
// and the fold never reads: the rendered scripts, the transfers and the chain hash.
func (r *foldingRow) keep() {
	if j := r.st.Job; j != nil {
		r.hasJob = true
		r.job = jobSummary{id: j.ID, name: j.Name, parent: j.Parent, submitter: j.Submitter, kind: j.Kind, restarts: j.Restarts,
			path: j.Original.Path}
		if j.DDS != nil {
			r.job.collection = j.DDS.CollectionPath
		}
	}
	r.st.Incarnation, r.st.Transfers, r.st.LastHash = nil, nil, ""
}

// fill writes the job a row keeps into j (a new one when nil), emptied first, and
// returns it: the job a fold starts from, for a packed row (row.foldState) and a
// replay's unpacked one alike.
func (s jobSummary) fill(j *events.Job) *events.Job {
	if j == nil {
		j = &events.Job{}
	} else {
		*j = events.Job{}
	}
	j.ID, j.Name, j.Parent, j.Submitter, j.Kind, j.Restarts = s.id, s.name, s.parent, s.submitter, s.kind, s.restarts
	j.Original.Path = s.path
	if s.collection != "" {
		j.DDS = &events.DDSContext{CollectionPath: s.collection}
	}
	return j
}

// finishReplay packs the rows the shards folded into t, which is empty, makes its order
// and counts, and stamps it with seq. Each row leaves its shard as it is packed, so a
// replay does not hold the rows twice.
func (t *Table) finishReplay(shards []*foldShard, seq uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, s := range shards {
		n += len(s.rows)
	}
	t.order = make([]string, 0, n)
	var job events.Job
	for _, s := range shards {
		for id, fr := range s.rows {
			st := fr.st
			if fr.hasJob {
				st.Job = fr.job.fill(&job)
			}
			r := compact(st)
			t.rows[id] = r
			t.order = append(t.order, id)
			t.count(&r, 1)
			delete(s.rows, id)
		}
		s.rows = nil
	}
	slices.Sort(t.order)
	t.seq = max(t.seq, seq)
}

// reduceData replaces the data of an event whose payload the row keeps only a few fields
// of by those fields, when it is plainly written (see reduce; checked: the decoder
// checked the data as JSON).
func reduceData(e *events.Event, checked bool) {
	if keep := keptFields(e.Name); keep != nil {
		if data, ok := reduce(e.Data, keep, checked); ok {
			e.Data = data
		}
	}
}

// reduce returns the JSON object of payload's fields named in keep (the last of a
// repeated one, as encoding/json takes it), or false when the payload is not valid JSON
// or not in the plain shape described above. It reads the payload once, checking it as
// it goes (the values it skips by events.JSONValueEnd, json.Valid's grammar); it may
// send to the whole decode what encoding/json would accept (an escaped key), never the
// reverse.
//
// checked says the payload is known to be valid JSON (the decoder checked it: see
// events.DecodeFoldJSON); the values it skips are then skipped, not checked again (the
// rendered scripts of an incarnated payload are kilobytes).
func reduce(payload []byte, keep []field, checked bool) (json.RawMessage, bool) {
	i := skipWS(payload, 0)
	out, end, ok := reduceObject(payload, i, keep, checked)
	if !ok || skipWS(payload, end) != len(payload) {
		return nil, false
	}
	return out, true
}

// reduceObject reduces the object at b[i] to the fields of keep and returns the index
// after it.
func reduceObject(b []byte, i int, keep []field, checked bool) (json.RawMessage, int, bool) {
	if i >= len(b) || b[i] != '{' {
		return nil, i, false
	}
	var room [8][]byte // the values found, on the stack for the fields a row keeps
	vals := room[:0]
	if len(keep) <= len(room) {
		vals = room[:len(keep)]
	} else {
		vals = make([][]byte, len(keep))
	}
	i = skipWS(b, i+1)
	for first := true; ; first = false {
		if first && i < len(b) && b[i] == '}' {
			i++
			break
		}
		end, ok := stringEnd(b, i, checked)
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
			vals[k], vend, ok = reduceObject(b, i, keep[k].sub, checked)
		default:
			vend, ok = valueEnd(b, i, checked)
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

// valueEnd is the index after the JSON value at b[i], and whether there is one: checked
// by events.JSONValueEnd, or skipped by skipValue when the text is known to be valid.
func valueEnd(b []byte, i int, checked bool) (int, bool) {
	if checked {
		return skipValue(b, i), true
	}
	return events.JSONValueEnd(b, i)
}

// stringEnd is valueEnd for a string (an object's key).
func stringEnd(b []byte, i int, checked bool) (int, bool) {
	if checked && i < len(b) && b[i] == '"' {
		return skipString(b, i), true
	}
	return events.JSONStringEnd(b, i)
}

// skipValue returns the index after the JSON value at b[i] of a valid JSON text: a
// string after its closing quote, an object or array after its closing bracket, any
// other value at the next delimiter. It checks nothing; on a valid text it ends where
// events.JSONValueEnd ends (FuzzSkipValue).
func skipValue(b []byte, i int) int {
	depth := 0
	for i < len(b) {
		switch b[i] {
		case '"':
			if i = skipString(b, i); depth == 0 {
				return i
			}
		case '{', '[':
			depth++
			i++
		case '}', ']':
			depth--
			if i++; depth <= 0 {
				return i
			}
		default:
			if depth == 0 {
				for i < len(b) && !scalarEnds(b[i]) {
					i++
				}
				return i
			}
			i++
		}
	}
	return i
}

// scalarEnds reports whether c ends a number, true, false or null.
func scalarEnds(c byte) bool {
	return c == ',' || c == '}' || c == ']' || c == ' ' || c == '\n' || c == '\t' || c == '\r'
}

// skipString returns the index after the string whose opening quote is at b[i]: after
// its first quote that no backslash escapes (one preceded by an even run of them).
func skipString(b []byte, i int) int {
	for j := i + 1; ; {
		k := bytes.IndexByte(b[j:], '"')
		if k < 0 {
			return len(b)
		}
		q, n := j+k, 0
		for p := q - 1; p > i && b[p] == '\\'; p-- {
			n++
		}
		if n%2 == 0 {
			return q + 1
		}
		j = q + 1
	}
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
	ascii := asciiOnly(key)
	for k, f := range keep {
		// Two ASCII strings of different lengths are never equal under folding (the
		// kept names are ASCII); only other keys need the Unicode rules (K, ſ).
		if ascii && len(key) != len(f.name) {
			continue
		}
		if strings.EqualFold(string(key), f.name) {
			return k, false
		}
	}
	return -1, false
}

func asciiOnly(b []byte) bool {
	for _, c := range b {
		if c >= 0x80 {
			return false
		}
	}
	return true
}

func skipWS(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\n' || b[i] == '\t' || b[i] == '\r') {
		i++
	}
	return i
}
