package events

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
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
	Signature string          `json:"signature,omitempty"` // ed25519 over SigningBytes (see sign.go)
	Data      json.RawMessage `json:"data,omitempty"`      // the payload

	Seq     uint64 `json:"seq,omitempty"`     // stream sequence, once stored
	Subject string `json:"subject,omitempty"` // stream subject, once stored
	Hash    string `json:"hash,omitempty"`    // SHA-256 (hex) of the stored body
}

// NewID returns a fresh ULID string, as used for job and event IDs.
func NewID() string { return ulid.MustNew(ulid.Now(), rand.Reader).String() }

// New builds an event for a job with a fresh ID, the given payload and time.
func New(jobID string, name Name, route string, at time.Time, payload any) (Event, error) {
	data, err := json.Marshal(payload)
	if err != nil {
		return Event{}, fmt.Errorf("encoding %s payload for job %s: %w", name, jobID, err)
	}
	return Event{ID: NewID(), Name: name, JobID: jobID, Route: route, Time: at.UTC(), Data: data}, nil
}

// Subject is where the event is stored.
func (e Event) subject() string { return Subject(e.JobID, e.Name, e.Route) }

// Payload decodes the event's data into v.
func (e Event) Payload(v any) error {
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
	case len(e.Data) > 0 && !json.Valid(e.Data):
		return fmt.Errorf("%w: data is not JSON", ErrBadEvent)
	}
	return nil
}

// Encode renders the event as a structured-mode CloudEvent, validated by the SDK.
func (e Event) Encode() ([]byte, error) {
	if err := e.Validate(); err != nil {
		return nil, err
	}
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
