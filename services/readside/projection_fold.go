package readside

import (
	"bytes"
	"encoding/json"
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
// it goes; it may send to the whole decode what encoding/json would accept (nesting
// deeper than maxDepth), never the reverse.
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
		key, end, ok := validString(b, i)
		if !ok || bytes.IndexByte(key, '\\') >= 0 {
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
			vend, ok = validValue(b, i, 1)
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

// maxDepth bounds the nesting validValue follows (encoding/json's own bound is 10,000);
// deeper payloads go to the whole decode.
const maxDepth = 512

// validValue checks the JSON value at b[i] and returns the index after it.
func validValue(b []byte, i, depth int) (int, bool) {
	if i >= len(b) {
		return i, false
	}
	switch c := b[i]; {
	case c == '"':
		_, end, ok := validString(b, i)
		return end, ok
	case c == '{' || c == '[':
		return validContainer(b, i, depth)
	case c == '-' || c >= '0' && c <= '9':
		return validNumber(b, i)
	}
	for _, lit := range []string{"true", "false", "null"} {
		if bytes.HasPrefix(b[i:], []byte(lit)) {
			return i + len(lit), true
		}
	}
	return i, false
}

// validContainer checks the object or array at b[i].
func validContainer(b []byte, i, depth int) (int, bool) {
	if depth >= maxDepth {
		return i, false
	}
	closing, object := byte(']'), b[i] == '{'
	if object {
		closing = '}'
	}
	i = skipWS(b, i+1)
	if i < len(b) && b[i] == closing {
		return i + 1, true
	}
	for {
		var ok bool
		if object {
			if _, i, ok = validString(b, i); !ok {
				return i, false
			}
			if i = skipWS(b, i); i >= len(b) || b[i] != ':' {
				return i, false
			}
			i = skipWS(b, i+1)
		}
		if i, ok = validValue(b, i, depth+1); !ok {
			return i, false
		}
		switch i = skipWS(b, i); {
		case i < len(b) && b[i] == ',':
			i = skipWS(b, i+1)
		case i < len(b) && b[i] == closing:
			return i + 1, true
		default:
			return i, false
		}
	}
}

// validString checks the JSON string at b[i] and returns its bytes between the quotes
// (escapes as written) and the index after it.
func validString(b []byte, i int) ([]byte, int, bool) {
	if i >= len(b) || b[i] != '"' {
		return nil, i, false
	}
	for j := i + 1; j < len(b); j++ {
		switch c := b[j]; {
		case c == '"':
			return b[i+1 : j], j + 1, true
		case c < 0x20:
			return nil, j, false
		case c == '\\':
			if j++; j >= len(b) {
				return nil, j, false
			}
			switch b[j] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if j+4 >= len(b) || !hex4(b[j+1:j+5]) {
					return nil, j, false
				}
				j += 4
			default:
				return nil, j, false
			}
		}
	}
	return nil, len(b), false
}

func hex4(h []byte) bool {
	for _, c := range h {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return false
		}
	}
	return true
}

// validNumber checks the JSON number at b[i]: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?
func validNumber(b []byte, i int) (int, bool) {
	if b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		i = digits(b, i)
	default:
		return i, false
	}
	if i < len(b) && b[i] == '.' {
		if j := digits(b, i+1); j > i+1 {
			i = j
		} else {
			return i, false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := digits(b, i)
		if j == i {
			return i, false
		}
		i = j
	}
	return i, true
}

func digits(b []byte, i int) int {
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	return i
}
