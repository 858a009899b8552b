package events

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/url"
	"strconv"
	"time"
	"unicode/utf8"
)

// errSlowPath says a body is not in the exact shape Store writes; Decode reads it with the
// CloudEvents SDK instead, which accepts every valid CloudEvent.
var errSlowPath = errors.New("events: body needs the full decoder")

// Decode parses a stored structured-mode CloudEvent and sets its Hash. It does not set
// Seq or Subject (DecodeStored does).
//
// Bodies in the shape Store writes (flat string attributes, JSON data) are read by a
// small scanner: a replay reads every event of the stream, and the SDK's decoder costs
// several times the fold itself. Anything else goes through the SDK, which judges every
// other spelling. Both paths give the same Event (TestFastDecodeMatchesSDK and
// FuzzFastDecode hold them to it).
func Decode(body []byte) (Event, error) {
	e, err := decodeBody(body)
	if err != nil {
		return Event{}, err
	}
	e.Hash = HashOf(body)
	return e, nil
}

// DecodeStored decodes a message read from the stream, with its sequence, subject and
// route. It leaves Hash empty: a fold does not need it, and hashing costs as much as
// decoding; HashOf(body) gives it to the reader that shows it. On error the Event
// still carries seq and subject, so the caller can say which message it left out.
func DecodeStored(body []byte, subject string, seq uint64) (Event, error) {
	e, err := decodeBody(body)
	if err != nil {
		return Event{Seq: seq, Subject: subject}, err
	}
	e.Seq, e.Subject = seq, subject
	if route := RouteOfSubject(subject); route != NoRoute {
		e.Route = route
	}
	return e, nil
}

// decodeBody is the one decoder: the fast path, else the SDK. Hash is left empty.
func decodeBody(body []byte) (Event, error) {
	if e, err := scanEnvelope(body); err == nil {
		return e, nil
	}
	return decodeSDK(body)
}

// envelope holds the attributes the decoder checks but does not keep, as raw bytes.
type envelope struct {
	spec, ctype, typ, tm, prevseq []byte
	hasPrevseq                    bool
}

// scanEnvelope reads a structured-mode CloudEvent whose attributes are all strings and
// whose data is a JSON object or array ("data", as Encode writes it) or base64
// ("data_base64", as every body was written before). Either way Data is the bytes as
// written: signatures cover them.
func scanEnvelope(b []byte) (Event, error) {
	var e Event
	var env envelope
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
		switch string(key) {
		case "data_base64":
			val, end, err := scanString(b, j)
			if err != nil {
				return e, err
			}
			data := make([]byte, base64.StdEncoding.DecodedLen(len(val)))
			n, err := base64.StdEncoding.Decode(data, val)
			if err != nil {
				return e, errSlowPath
			}
			e.Data, haveData, j = json.RawMessage(data[:n:n]), true, end
		case "data":
			// Data as Encode writes it now: a JSON object or array, kept as written (it
			// shares the body's bytes). Bodies written before hold it in data_base64.
			if j >= len(b) || b[j] != '{' && b[j] != '[' {
				return e, errSlowPath
			}
			end, ok := JSONValueEnd(b, j)
			if !ok || !jsonData(b[j:end]) { // nested deeper than the SDK reads
				return e, errSlowPath
			}
			e.Data, haveData, j = json.RawMessage(b[j:end:end]), true, end
		default:
			val, end, err := scanString(b, j)
			if err != nil {
				return e, err
			}
			if !setAttr(&e, &env, key, val) {
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
	return finishEnvelope(e, env)
}

func setAttr(e *Event, env *envelope, key, val []byte) bool {
	switch string(key) {
	case "specversion":
		env.spec = val
	case "id":
		e.ID = string(val)
	case "source":
		e.Source = string(val)
	case "type":
		env.typ = val
	case "subject":
		e.JobID = string(val)
	case "datacontenttype":
		env.ctype = val
	case "time":
		env.tm = val
	case ExtPrevHash:
		e.PrevHash = string(val)
	case ExtPrincipal:
		e.Principal = string(val)
	case ExtSigner:
		e.Signer = string(val)
	case ExtSignature:
		e.Signature = string(val)
	case ExtPrevSeq:
		env.prevseq, env.hasPrevseq = val, true
	default:
		return false
	}
	return true
}

func finishEnvelope(e Event, env envelope) (Event, error) {
	if string(env.spec) != "1.0" || string(env.ctype) != "application/json" || e.ID == "" || e.Source == "" ||
		e.JobID == "" || len(env.tm) == 0 || !plainSource(e.Source) {
		return e, errSlowPath
	}
	if e.Name = nameOfType(env.typ); e.Name == "" {
		return e, errSlowPath
	}
	// Only the exact form the SDK writes: other spellings are the SDK's to judge.
	t, err := time.Parse(time.RFC3339Nano, string(env.tm))
	var buf [40]byte
	if err != nil || t.Location() != time.UTC || !bytes.Equal(t.AppendFormat(buf[:0], time.RFC3339Nano), env.tm) {
		return e, errSlowPath
	}
	e.Time = t
	if env.hasPrevseq {
		if e.PrevSeq = parseSeq(env.prevseq); e.PrevSeq == 0 {
			return e, errSlowPath
		}
	}
	return e, nil
}

// plainSource reports whether the SDK keeps a source exactly as written: a URI
// reference that url.Parse reads back unchanged. Sources of letters, digits and / . _ ~ -
// always are; any other is checked by a round trip.
func plainSource(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '/' || c == '.' || c == '_' || c == '~' || c == '-') {
			u, err := url.Parse(s)
			return err == nil && u.String() == s
		}
	}
	return true
}

// nameOfType is the known event name of a CloudEvents type at its current version, ""
// for any other (an older version goes to the slow path, which upcasts it).
func nameOfType(typ []byte) Name {
	mid, ok := bytes.CutPrefix(typ, []byte(TypePrefix))
	if !ok {
		return ""
	}
	i := bytes.LastIndex(mid, []byte(".v"))
	if i <= 0 {
		return ""
	}
	n := Name(mid[:i])
	if !n.Known() || string(mid[i+2:]) != strconv.Itoa(n.Version()) {
		return ""
	}
	return n
}

// parseSeq reads a decimal sequence without sign or leading zero; 0 when malformed.
func parseSeq(b []byte) uint64 {
	if len(b) == 0 || len(b) > 19 || b[0] == '0' {
		return 0
	}
	var n uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0
		}
		n = n*10 + uint64(c-'0')
	}
	return n
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\n' || b[i] == '\t' || b[i] == '\r') {
		i++
	}
	return i
}

// scanString reads a JSON string at b[i] without escapes (an escape is rare in gridwire's
// attributes and goes to the slow path); it returns the string's bytes.
func scanString(b []byte, i int) ([]byte, int, error) {
	if i >= len(b) || b[i] != '"' {
		return nil, i, errSlowPath
	}
	for j := i + 1; j < len(b); j++ {
		switch c := b[j]; {
		case c == '"':
			if !utf8.Valid(b[i+1 : j]) {
				return nil, j, errSlowPath
			}
			return b[i+1 : j], j + 1, nil
		case c == '\\' || c < 0x20:
			return nil, j, errSlowPath
		}
	}
	return nil, len(b), errSlowPath
}
