package watcher

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/url"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/gridwire/gridwire/events"
)

// errSlowPath says a body is not in the exact shape gridwire's store writes; the caller
// decodes it with events.Decode instead, which accepts every valid CloudEvent.
var errSlowPath = errors.New("watcher: body needs the full decoder")

// decodeStored decodes a stored event body for the projection fold. Replays read
// every event of the stream, and the CloudEvents SDK's decoder costs several times the
// fold itself, so bodies in the shape events.Store writes (flat string attributes, JSON
// data) are read by a small scanner; anything else goes through events.Decode. Both
// paths give the same Event (proven by TestFastDecodeMatchesEvents and its fuzz target),
// except Hash, which the projection does not keep and so is not computed here.
func decodeStored(body []byte) (events.Event, error) {
	e, err := scanEnvelope(body)
	if err == nil {
		return e, nil
	}
	e, err = events.Decode(body)
	e.Hash = ""
	return e, err
}

// scanEnvelope reads a structured-mode CloudEvent whose attributes are all strings and
// whose data is JSON.
func scanEnvelope(b []byte) (events.Event, error) {
	var e events.Event
	var spec, ctype, typ, tm, prevseq string
	var haveData bool
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return e, errSlowPath
	}
	i = skipSpace(b, i+1)
	for first := true; ; first = false {
		if i < len(b) && b[i] == '}' && first {
			i++
			break
		}
		key, j, err := scanString(b, i)
		if err != nil {
			return e, err
		}
		j = skipSpace(b, j)
		if j >= len(b) || b[j] != ':' {
			return e, errSlowPath
		}
		j = skipSpace(b, j+1)
		if key == "data_base64" {
			val, end, err := scanString(b, j)
			if err != nil {
				return e, err
			}
			data, err := base64.StdEncoding.DecodeString(val)
			if err != nil {
				return e, errSlowPath
			}
			e.Data, haveData = json.RawMessage(data), true
			j = end
		} else if key == "data" {
			end, err := skipValue(b, j)
			if err != nil || b[j] != '{' && b[j] != '[' {
				return e, errSlowPath
			}
			e.Data, haveData = json.RawMessage(b[j:end:end]), true
			j = end
		} else {
			val, end, err := scanString(b, j)
			if err != nil {
				return e, err
			}
			if !setAttr(&e, key, val, &spec, &ctype, &typ, &tm, &prevseq) {
				return e, errSlowPath
			}
			j = end
		}
		j = skipSpace(b, j)
		if j < len(b) && b[j] == ',' {
			i = skipSpace(b, j+1)
			continue
		}
		if j < len(b) && b[j] == '}' {
			i = j + 1
			break
		}
		return e, errSlowPath
	}
	if skipSpace(b, i) != len(b) || !haveData {
		return e, errSlowPath
	}
	return finishEnvelope(e, spec, ctype, typ, tm, prevseq)
}

func setAttr(e *events.Event, key, val string, spec, ctype, typ, tm, prevseq *string) bool {
	switch key {
	case "specversion":
		*spec = val
	case "id":
		e.ID = val
	case "source":
		e.Source = val
	case "type":
		*typ = val
	case "subject":
		e.JobID = val
	case "datacontenttype":
		*ctype = val
	case "time":
		*tm = val
	case events.ExtPrevHash:
		e.PrevHash = val
	case events.ExtPrincipal:
		e.Principal = val
	case events.ExtPrevSeq:
		*prevseq = val
	default:
		return false
	}
	return true
}

func finishEnvelope(e events.Event, spec, ctype, typ, tm, prevseq string) (events.Event, error) {
	if spec != "1.0" || ctype != "application/json" || e.ID == "" || e.Source == "" || e.JobID == "" || tm == "" {
		return e, errSlowPath
	}
	if u, err := url.Parse(e.Source); err != nil || u.String() != e.Source {
		return e, errSlowPath // the SDK keeps the source as a URI reference, re-spelled
	}
	if e.Name = events.NameOfType(typ); e.Name == "" || !e.Name.Known() {
		return e, errSlowPath
	}
	// Only the exact form the SDK writes: other spellings are the SDK's to judge.
	t, err := time.Parse(time.RFC3339Nano, tm)
	if err != nil || t.Location() != time.UTC || t.Format(time.RFC3339Nano) != tm {
		return e, errSlowPath
	}
	e.Time = t.UTC()
	if prevseq != "" {
		if e.PrevSeq, err = strconv.ParseUint(prevseq, 10, 64); err != nil || e.PrevSeq == 0 {
			return e, errSlowPath
		}
	}
	return e, nil
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\n' || b[i] == '\t' || b[i] == '\r') {
		i++
	}
	return i
}

// scanString reads a JSON string at b[i] without escapes (an escape is rare in gridwire's
// attributes and goes to the slow path).
func scanString(b []byte, i int) (string, int, error) {
	if i >= len(b) || b[i] != '"' {
		return "", i, errSlowPath
	}
	for j := i + 1; j < len(b); j++ {
		switch c := b[j]; {
		case c == '"':
			if !utf8.Valid(b[i+1 : j]) {
				return "", j, errSlowPath
			}
			return string(b[i+1 : j]), j + 1, nil
		case c == '\\' || c < 0x20:
			return "", j, errSlowPath
		}
	}
	return "", len(b), errSlowPath
}

// skipValue returns the end of the JSON object or array starting at b[i]; json.Valid on
// the span confirms it, as the SDK's decoder would.
func skipValue(b []byte, i int) (int, error) {
	depth := 0
	for j := i; j < len(b); j++ {
		switch b[j] {
		case '"':
			k := bytes.IndexByte(b[j+1:], '"')
			for k >= 0 && escaped(b, j+1+k) {
				n := bytes.IndexByte(b[j+2+k:], '"')
				if n < 0 {
					return 0, errSlowPath
				}
				k += n + 1
			}
			if k < 0 {
				return 0, errSlowPath
			}
			j += 1 + k
		case '{', '[':
			depth++
		case '}', ']':
			depth--
			if depth == 0 {
				if !json.Valid(b[i : j+1]) {
					return 0, errSlowPath
				}
				return j + 1, nil
			}
		}
	}
	return 0, errSlowPath
}

// escaped reports whether the quote at b[q] is preceded by an odd number of backslashes.
func escaped(b []byte, q int) bool {
	n := 0
	for k := q - 1; k >= 0 && b[k] == '\\'; k-- {
		n++
	}
	return n%2 == 1
}
