package events

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	ce "github.com/cloudevents/sdk-go/v2/event"
	"github.com/oklog/ulid/v2"
)

// CloudEvents extension attributes gridwire sets on its events.
const (
	// ExtPrevHash holds the SHA-256 (hex) of the job's previous event as stored, so a
	// job's history is a hash chain; empty on a job's first event.
	ExtPrevHash = "prevhash"
	// ExtPrincipal names who caused the event (a token's principal, a service).
	ExtPrincipal = "principal"
	// ExtPrevSeq holds the stream sequence of the job's previous event (decimal), so a
	// job's history can be walked back from its last event in O(events) whatever the
	// size of the stream; absent on a job's first event.
	ExtPrevSeq = "prevseq"
)

// Event is one fact about one job: a CloudEvent in structured mode with a JSON body.
// Seq, Subject and Hash are set when the event is read back from the stream.
type Event struct {
	ID        string          `json:"id"`                  // ULID; also the Nats-Msg-Id, so retries de-duplicate
	Name      Name            `json:"name"`                // from the CloudEvents type
	JobID     string          `json:"job"`                 // the CloudEvents subject
	Source    string          `json:"source"`              // the emitting service instance
	Time      time.Time       `json:"time"`                // when the fact was recorded
	Route     string          `json:"route,omitempty"`     // cluster the event is addressed to
	Principal string          `json:"principal,omitempty"` // who caused it
	PrevHash  string          `json:"prevhash,omitempty"`  // hash of the job's previous event
	PrevSeq   uint64          `json:"prevseq,omitempty"`   // stream sequence of the job's previous event
	Signer    string          `json:"signer,omitempty"`    // public nkey of the role key that signed it
	Signature string          `json:"signature,omitempty"` // ed25519 over SigningBytes, or its batch's (sign.go, batchsign.go)
	Data      json.RawMessage `json:"data,omitempty"`      // the payload

	Seq     uint64 `json:"seq,omitempty"`     // stream sequence, once stored
	Subject string `json:"subject,omitempty"` // stream subject, once stored
	Hash    string `json:"hash,omitempty"`    // SHA-256 (hex) of the stored body
}

// NewID returns a fresh ULID string, as used for job and event IDs.
func NewID() string { return ulid.MustNew(ulid.Now(), rand.Reader).String() }

// New builds an event for a job with a fresh ID, the given payload and time.
func New(jobID string, name Name, route string, at time.Time, payload any) (Event, error) {
	data, err := marshalPayload(payload)
	if err != nil {
		return Event{}, fmt.Errorf("encoding %s payload for job %s: %w", name, jobID, err)
	}
	return Event{ID: NewID(), Name: name, JobID: jobID, Route: route, Time: at.UTC(), Data: data}, nil
}

// Subject is where the event is stored.
func (e Event) subject() string { return Subject(e.JobID, e.Name, e.Route) }

// Payload decodes the event's data into v: a plain payload of a job's life by
// fastPayload, any other with encoding/json.
func (e Event) Payload(v any) error {
	if fastPayload(e.Data, v) {
		return nil
	}
	if err := json.Unmarshal(e.Data, v); err != nil {
		return fmt.Errorf("%w: %s %s: payload: %v", ErrBadEvent, e.Name, e.ID, err)
	}
	return nil
}

// Validate checks what the store requires before an append.
func (e Event) Validate() error {
	switch {
	case e.ID == "":
		return fmt.Errorf("%w: no id", ErrBadEvent)
	case !validJobID(e.JobID):
		return fmt.Errorf("%w: job id %q is not a subject token", ErrBadEvent, e.JobID)
	case !e.Name.Known():
		return fmt.Errorf("%w: %q", ErrUnknownEvent, e.Name)
	case e.Route != "" && !ValidRoute(e.Route):
		return fmt.Errorf("%w: route %q", ErrBadEvent, e.Route)
	case e.Source == "":
		return fmt.Errorf("%w: no source", ErrBadEvent)
	case e.Time.IsZero():
		return fmt.Errorf("%w: no time", ErrBadEvent)
	case len(e.Data) > 0 && !validJSON(e.Data):
		return fmt.Errorf("%w: data is not JSON", ErrBadEvent)
	}
	return nil
}

// Encode renders the event as a structured-mode CloudEvent: the bytes the CloudEvents
// SDK writes for it (attributes, the data, then the extensions in name order), written
// directly. The data is written as it is, a JSON value in the "data" member, when it is
// an object or array (what json.Marshal gives for a payload) that reads back byte for
// byte (see jsonData); any other data in "data_base64", as every body was written before
// (docs/events.md: old logs keep that spelling, and both decode to the same bytes). Every event gridwire appends goes through here, and the
// SDK's event, its validation and its writer cost several times the rest of an append.
// An event the direct writer does not know the SDK to write the same way (an id with
// surrounding blanks, a source url.Parse rewrites) is encoded by the SDK itself.
// TestEncodeMatchesSDK and FuzzEncode hold both to the same bytes.
func (e Event) Encode() ([]byte, error) {
	if err := e.Validate(); err != nil {
		return nil, err
	}
	if b, ok := e.appendEnvelope(nil); ok {
		return b, nil
	}
	return e.encodeSDK()
}

// appendEnvelope appends what encodeSDK would return for a valid event; ok is false
// for an event whose attributes the SDK would rewrite or refuse.
func (e Event) appendEnvelope(b []byte) ([]byte, bool) {
	if e.ID == "" || strings.TrimSpace(e.ID) != e.ID || e.Source == "" || !plainSource(e.Source) {
		return nil, false
	}
	data := e.Data
	if len(data) == 0 {
		data = json.RawMessage("{}")
	}
	asJSON := jsonData(data)
	n := len(data)
	if !asJSON {
		n = base64.StdEncoding.EncodedLen(len(data))
	}
	b = slices.Grow(b, 256+len(e.Principal)+len(e.Signer)+len(e.Signature)+n)
	b = append(b, `{"specversion":"1.0","id":`...)
	b = appendSDKString(b, e.ID)
	b = append(b, `,"source":`...)
	b = appendSDKString(b, e.Source)
	b = append(b, `,"type":"`...)
	b = append(b, TypePrefix...)
	b = append(b, e.Name...)
	b = append(b, ".v"...)
	b = strconv.AppendInt(b, int64(e.Name.Version()), 10)
	b = append(b, `","subject":`...)
	b = appendSDKString(b, e.JobID)
	b = append(b, `,"datacontenttype":"application/json","time":"`...)
	b = e.Time.UTC().AppendFormat(b, time.RFC3339Nano)
	if asJSON {
		b = append(b, `","data":`...)
		b = append(b, data...)
	} else {
		b = append(b, `","data_base64":"`...)
		b = base64.StdEncoding.AppendEncode(b, data)
		b = append(b, '"')
	}
	// The extensions, in the SDK's order: sorted by name.
	if e.PrevHash != "" {
		b = append(b, `,"prevhash":`...)
		b = appendSDKString(b, e.PrevHash)
	}
	if e.PrevSeq != 0 {
		b = append(b, `,"prevseq":"`...)
		b = strconv.AppendUint(b, e.PrevSeq, 10)
		b = append(b, '"')
	}
	if e.Principal != "" {
		b = append(b, `,"principal":`...)
		b = appendSDKString(b, e.Principal)
	}
	if e.Signer != "" || e.Signature != "" {
		b = append(b, `,"signature":`...)
		b = appendSDKString(b, e.Signature)
		b = append(b, `,"signer":`...)
		b = appendSDKString(b, e.Signer)
	}
	return append(b, '}'), true
}

// maxDataDepth is the deepest nesting of objects and arrays data may have to be written
// as a JSON value: the envelope adds one level, and encoding/json (the SDK's decoder runs
// it over the whole body first) and json-iterator (the SDK's reader) refuse a body nested
// deeper than 10,000.
const maxDataDepth = 10000 - 1

// jsonData reports whether valid JSON data is written as a JSON value, in "data": when it
// is one object or array with nothing around it, so that every decoder (the fast path, the
// SDK) reads back exactly its bytes, and nested no deeper than maxDataDepth, so that the
// body stays within every decoder's limit. Other data (a bare string or number, blanks
// around the value) is written in "data_base64", which keeps any bytes as they are.
func jsonData(data []byte) bool {
	if len(data) < 2 || data[0] != '{' && data[0] != '[' || data[len(data)-1] != '}' && data[len(data)-1] != ']' {
		return false
	}
	// Each level takes two bytes, so short data cannot nest too deep.
	return len(data) <= 2*maxDataDepth || depthOf(data) <= maxDataDepth
}

// depthOf is the deepest nesting of objects and arrays in valid JSON.
func depthOf(data []byte) int {
	depth, deepest := 0, 0
	for i := 0; i < len(data); i++ {
		switch data[i] {
		case '"':
			end, _ := JSONStringEnd(data, i)
			i = end - 1
		case '{', '[':
			if depth++; depth > deepest {
				deepest = depth
			}
		case '}', ']':
			depth--
		}
	}
	return deepest
}

// appendSDKString appends s as a JSON string escaped as the SDK's writer (json-iterator's
// WriteString) escapes it: quote and backslash by a backslash, control characters as
// \n, \r, \t or \u00XX, every other byte as it is.
func appendSDKString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		// Eight bytes at a time while none needs escaping: most strings (IDs, the
		// signature and its batch path) need none.
		for i+8 <= len(s) && !needsEscape8(s[i:i+8]) {
			i += 8
		}
		if i >= len(s) {
			break
		}
		c := s[i]
		if c > 31 && c != '"' && c != '\\' {
			continue
		}
		b = append(b, s[start:i]...)
		switch c {
		case '"', '\\':
			b = append(b, '\\', c)
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		default:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
		start = i + 1
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// needsEscape8 reports whether any of the eight bytes of w is one appendSDKString
// escapes: below 0x20, '"' or '\\' (the exact tests for a byte below n and a zero
// byte, on eight bytes at once).
func needsEscape8(w string) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	x := binary.LittleEndian.Uint64([]byte(w))
	below := (x - ones*0x20) &^ x
	quote := x ^ ones*'"'
	slash := x ^ ones*'\\'
	return (below|(quote-ones)&^quote|(slash-ones)&^slash)&highs != 0
}

// encodeSDK renders a valid event with the CloudEvents SDK: its event, its validation
// and its writer.
func (e Event) encodeSDK() ([]byte, error) {
	c := ce.New()
	c.SetID(e.ID)
	c.SetType(e.Name.Type())
	c.SetSource(e.Source)
	c.SetSubject(e.JobID)
	c.SetTime(e.Time)
	if e.PrevHash != "" {
		c.SetExtension(ExtPrevHash, e.PrevHash)
	}
	if e.Principal != "" {
		c.SetExtension(ExtPrincipal, e.Principal)
	}
	if e.PrevSeq != 0 {
		c.SetExtension(ExtPrevSeq, strconv.FormatUint(e.PrevSeq, 10))
	}
	if e.Signer != "" || e.Signature != "" {
		c.SetExtension(ExtSigner, e.Signer)
		c.SetExtension(ExtSignature, e.Signature)
	}
	data := e.Data
	if len(data) == 0 {
		data = json.RawMessage("{}")
	}
	if err := c.SetData(ce.ApplicationJSON, []byte(data)); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadEvent, err)
	}
	// SetData with bytes marks the data for base64; the SDK's writer puts data that is
	// not marked, with a JSON content type, in "data" as it is.
	c.DataBase64 = !jsonData(data)
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadEvent, err)
	}
	// The SDK's own writer, without json.Marshal's second pass over its output (the
	// data was checked by Validate; the rest the SDK writes itself).
	return c.MarshalJSON()
}

// decodeSDK parses a structured-mode CloudEvent with the CloudEvents SDK: the slow path of
// Decode, for every valid spelling the fast path leaves to it, and for every older schema
// version, which it upcasts (see Upcasters). Hash is left empty.
func decodeSDK(body []byte) (Event, error) {
	e, version, err := decodeVersioned(body)
	if err != nil {
		return Event{}, err
	}
	return builtinUpcasters.Upcast(e, version)
}

// decodeVersioned parses a structured-mode CloudEvent of any schema version with the
// SDK and returns the version its type names, without upcasting. Hash is left empty.
func decodeVersioned(body []byte) (Event, int, error) {
	var c ce.Event
	if err := json.Unmarshal(body, &c); err != nil {
		return Event{}, 0, fmt.Errorf("%w: %v", ErrBadEvent, err)
	}
	if err := c.Validate(); err != nil {
		return Event{}, 0, fmt.Errorf("%w: %v", ErrBadEvent, err)
	}
	name, version, ok := ParseType(c.Type())
	if !ok {
		return Event{}, 0, fmt.Errorf("%w: type %q", ErrUnknownEvent, c.Type())
	}
	e := Event{
		ID: c.ID(), Name: name, JobID: c.Subject(), Source: c.Source(), Time: c.Time(),
		Data: json.RawMessage(c.Data()),
	}
	e.PrevHash, _ = stringExt(c, ExtPrevHash)
	e.Principal, _ = stringExt(c, ExtPrincipal)
	e.Signer, _ = stringExt(c, ExtSigner)
	e.Signature, _ = stringExt(c, ExtSignature)
	if ps, ok := stringExt(c, ExtPrevSeq); ok {
		n, err := strconv.ParseUint(ps, 10, 64)
		if err != nil {
			return Event{}, 0, fmt.Errorf("%w: %s %q", ErrBadEvent, ExtPrevSeq, ps)
		}
		e.PrevSeq = n
	}
	return e, version, nil
}

func stringExt(c ce.Event, name string) (string, bool) {
	v, ok := c.Extensions()[name]
	if !ok {
		return "", false
	}
	s, ok := v.(string)
	return s, ok
}

// HashOf is the chain hash of a stored event body.
func HashOf(body []byte) string {
	sum := sha256.Sum256(body)
	return hex.EncodeToString(sum[:])
}

func validJobID(id string) bool {
	if id == "" || len(id) > 64 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= '0' && c <= '9' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}
