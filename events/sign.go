package events

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gridwire/gridwire/pkg/groupcommit"
	"github.com/nats-io/nkeys"
)

// Signed events: every event a gridwire service appends carries the public key of the
// role key that wrote it (ExtSigner, a NATS user nkey, "U...") and an ed25519 signature
// (ExtSignature, base64url) over SigningBytes: the canonical envelope, the route and the
// hash-chain link included. Events appended many at once, or single appends signed at
// the same moment, share one signature per batch and each carries its proof of
// membership instead (batchsign.go, groupsign.go). A Keyring holds the public keys an auditor trusts, each with
// its role; the rights table below says which role may write which event. The audit
// fails an event whose signature does not hold, whose signer is unknown, or whose
// signer's role may not write it (see docs/security.md).

// CloudEvents extension attributes of a signed event.
const (
	// ExtSigner is the public nkey of the key that signed the event.
	ExtSigner = "signer"
	// ExtSignature is the ed25519 signature (unpadded base64url) over SigningBytes, or a
	// batch signature with the event's path to the batch's signed root (batchsign.go).
	ExtSignature = "signature"
)

// Role is the service a signing key speaks for.
type Role string

// The roles that write events.
const (
	RoleIngest     Role = "ingest"     // submissions, and external events, to no cluster
	RoleIncarnator Role = "incarnator" // placement
	RoleStager     Role = "stager"     // transfers
	RoleExecutor   Role = "executor"   // a cluster's START, HOLD, RESUME, ABORT, DELETE; control requests
	RoleWatcher    Role = "watcher"    // what happened on the target; group decisions
)

// Errors of signing and verification; match with errors.Is.
var (
	ErrUnsigned     = errors.New("events: event is not signed")
	ErrBadSignature = errors.New("events: signature does not hold")
	ErrUnknownKey   = errors.New("events: signer is not a trusted key")
	ErrNoRight      = errors.New("events: signer's role may not write this event")
	ErrBadKey       = errors.New("events: malformed key")
)

// facts are the events ingest may record for other systems: every one but the
// housekeeping only a cluster's executor does (directory_deleted).
var facts = slices.DeleteFunc(slices.Clone(names), func(n Name) bool { return n == DirectoryDeleted })

// requests are the events a principal's cancel, hold or resume becomes.
var requests = []Name{CancelRequested, HoldRequested, ResumeRequested}

// rights is the one table of which role may write which event. Ingest writes only
// unrouted events (a group's submitted event excepted: it is routed to RouteGroup, no
// cluster): submissions, and facts other systems publish (every event type but the
// executor's directory_deleted), which never hand work to a cluster. Every other role
// may route its events.
var rights = map[Role][]Name{
	RoleIngest:     facts,
	RoleIncarnator: {Incarnated, Failed, Cancelled},
	RoleStager:     {StagingIn, Transfer, Queued, StagedOut, Failed, Cancelled},
	RoleExecutor:   append([]Name{Started, Held, Resumed, ActionFailed, Cancelled, Failed, DirectoryDeleted}, requests...),
	RoleWatcher: append([]Name{StatusChanged, StatusUnknown, StatusKnown, Exited, Succeeded, Failed, Cancelled,
		Restarted}, requests...),
}

// Roles lists every role that signs, in table order.
func Roles() []Role {
	return []Role{RoleIngest, RoleIncarnator, RoleStager, RoleExecutor, RoleWatcher}
}

// ParseRole reads a role name.
func ParseRole(s string) (Role, error) {
	if _, ok := rights[Role(s)]; !ok {
		return "", fmt.Errorf("%w: role %q is not one of %v", ErrBadKey, s, Roles())
	}
	return Role(s), nil
}

// Grant is what one key may write: its role's events, on jobs of its clusters only when
// Clusters is set (an executor key per cluster).
type Grant struct {
	Role     Role
	Clusters []string
}

// SourcePrefix begins the CloudEvents source of every event a gridwire service writes:
// SourcePrefix + role + "/" + instance.
const SourcePrefix = "gridwire/"

// May reports why e may not be written by this grant on a job in state st (nil: it may).
func (g Grant) May(e Event, st State) error {
	if !slices.Contains(rights[g.Role], e.Name) {
		return fmt.Errorf("%w: role %s does not write %s", ErrNoRight, g.Role, e.Name)
	}
	if err := g.maySource(e); err != nil {
		return err
	}
	if g.Role == RoleIngest && e.Route != "" && !(e.Name == Submitted && e.Route == RouteGroup) {
		return fmt.Errorf("%w: role %s writes %s unrouted, not to %s", ErrNoRight, g.Role, e.Name, e.Route)
	}
	if len(g.Clusters) == 0 {
		return nil
	}
	// Both where the event is routed and where the job is placed must be the key's.
	for _, cluster := range []string{e.Route, st.Cluster} {
		if cluster != "" && !slices.Contains(g.Clusters, cluster) {
			return fmt.Errorf("%w: the %s key of clusters %v writes %s for cluster %s", ErrNoRight, g.Role, g.Clusters, e.Name, cluster)
		}
	}
	return nil
}

// maySource: a role writes under its own source (gridwire/<role>/<instance>); ingest
// also records facts other systems published, under their sources, which are never
// gridwire's own and always name the principal who published them.
// An event not yet stamped with a source (the store stamps its own) is not judged here:
// no stored event lacks one.
func (g Grant) maySource(e Event) error {
	own := SourcePrefix + string(g.Role) + "/"
	switch {
	case e.Source == "" || strings.HasPrefix(e.Source, own):
		return nil
	case g.Role != RoleIngest || strings.HasPrefix(e.Source, SourcePrefix):
		return fmt.Errorf("%w: role %s writes under source %q, which is not its own (%s...)", ErrNoRight, g.Role, e.Source, own)
	case e.Principal == "":
		return fmt.Errorf("%w: an external %s (source %q) names no principal who published it", ErrNoRight, e.Name, e.Source)
	}
	return nil
}

// SigningKey signs events for one grant. It is safe for concurrent use.
type SigningKey struct {
	grant Grant
	pub   string
	priv  ed25519.PrivateKey
	group groupcommit.Queue[*signJob] // a store's single appends signed at the same moment (groupsign.go)
}

// NewSeed makes a fresh user nkey seed ("SU...") for a signing key.
func NewSeed() ([]byte, error) {
	kp, err := nkeys.CreateUser()
	if err != nil {
		return nil, err
	}
	return kp.Seed()
}

// NewSigningKey reads a user nkey seed as the key of grant g.
func NewSigningKey(seed []byte, g Grant) (*SigningKey, error) {
	prefix, raw, err := nkeys.DecodeSeed(seed)
	if err != nil || prefix != nkeys.PrefixByteUser {
		return nil, fmt.Errorf("%w: not a user nkey seed", ErrBadKey)
	}
	priv := ed25519.NewKeyFromSeed(raw)
	pub, err := nkeys.Encode(nkeys.PrefixByteUser, priv.Public().(ed25519.PublicKey))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadKey, err)
	}
	return &SigningKey{grant: g, pub: string(pub), priv: priv}, nil
}

// PublicKey is the key's public nkey, as events and the config name it.
func (k *SigningKey) PublicKey() string { return k.pub }

// Grant is what the key may write.
func (k *SigningKey) Grant() Grant { return k.grant }

// Sign sets e's signer and signature. e must be complete: every field SigningBytes reads
// (the chain link and the route included) is final.
func (k *SigningKey) Sign(e *Event) {
	e.Signer = k.pub
	e.Signature = base64.RawURLEncoding.EncodeToString(ed25519.Sign(k.priv, SigningBytes(*e, e.Name.Version())))
}

// Keyring is the public keys an auditor trusts, each with its grant.
type Keyring struct {
	keys  map[string]trustedKey
	roots *rootCache // batch roots whose signature held (see verifyBatch)
}

type trustedKey struct {
	grant Grant
	pub   ed25519.PublicKey
}

// Add trusts a public user nkey ("U...") for grant g.
func (r *Keyring) Add(public string, g Grant) error {
	raw, err := nkeys.Decode(nkeys.PrefixByteUser, []byte(public))
	if err != nil {
		return fmt.Errorf("%w: %q is not a public user nkey", ErrBadKey, public)
	}
	if _, ok := rights[g.Role]; !ok {
		return fmt.Errorf("%w: role %q", ErrBadKey, g.Role)
	}
	if r.keys == nil {
		r.keys = map[string]trustedKey{}
		r.roots = &rootCache{seen: map[string]struct{}{}}
	}
	if old, ok := r.keys[public]; ok && old.grant.Role != g.Role {
		return fmt.Errorf("%w: %s is listed for both %s and %s", ErrBadKey, public, old.grant.Role, g.Role)
	}
	r.keys[public] = trustedKey{grant: g, pub: ed25519.PublicKey(raw)}
	return nil
}

// Len is how many keys the ring trusts.
func (r *Keyring) Len() int { return len(r.keys) }

// Verify checks a stored event body, as written (before any upcast), stored under route,
// on a job whose state before it is st: the signature, its own or its batch's, must hold
// for a trusted key whose grant may write the event. ErrUnsigned says it carries no
// signature at all. It is safe for concurrent use once every key is added.
func (r *Keyring) Verify(body []byte, route string, st State) (Grant, error) {
	e, version, err := decodeAsWritten(body)
	if err != nil {
		return Grant{}, err
	}
	e.Route = route
	if e.Signer == "" && e.Signature == "" {
		return Grant{}, ErrUnsigned
	}
	k, ok := r.keys[e.Signer]
	if !ok {
		return Grant{}, fmt.Errorf("%w: %s", ErrUnknownKey, e.Signer)
	}
	if err := r.holds(k, e, version); err != nil {
		return k.grant, fmt.Errorf("%w (signer %s, role %s): %v", ErrBadSignature, e.Signer, k.grant.Role, err)
	}
	return k.grant, k.grant.May(e, st)
}

// holds checks e's signature, a single one or a batch's (see batchsign.go), over its
// signing bytes for key k.
func (r *Keyring) holds(k trustedKey, e Event, version int) error {
	signing := SigningBytes(e, version)
	if isBatch(e.Signature) {
		return r.verifyBatch(e.Signer, k.pub, e.Signature, signing)
	}
	sig, err := base64.RawURLEncoding.DecodeString(e.Signature)
	if err != nil || !ed25519.Verify(k.pub, signing, sig) {
		return errors.New("the ed25519 signature over the event does not hold")
	}
	return nil
}

// decodeAsWritten reads a body without upcasting, with the schema version its type names.
func decodeAsWritten(body []byte) (Event, int, error) {
	if e, err := scanEnvelope(body); err == nil {
		return e, e.Name.Version(), nil
	}
	return decodeVersioned(body)
}

// signingDomain begins the signed bytes, so a signature over them means nothing else.
const signingDomain = "gridwire-event-signature-v1"

// SigningBytes is what a signature covers: every envelope attribute a reader acts on,
// the data as written, the route the event is stored under and the chain link (prevseq,
// prevhash), each length-prefixed. The signature attributes themselves are not in it.
func SigningBytes(e Event, version int) []byte {
	return appendSigningBytes(make([]byte, 0, signingSize(e)), e, version)
}

// appendSigningBytes appends e's signing bytes to dst, field by field, without building
// anything else.
func appendSigningBytes(dst []byte, e Event, version int) []byte {
	data := e.Data
	if len(data) == 0 {
		data = []byte("{}")
	}
	var tb [40]byte
	var nb [20]byte
	dst = appendField(dst, signingDomain)
	dst = appendField(dst, e.ID)
	dst = appendField(dst, e.Name)
	dst = appendField(dst, strconv.AppendInt(nb[:0], int64(version), 10))
	dst = appendField(dst, e.Source)
	dst = appendField(dst, e.JobID)
	dst = appendField(dst, e.Route)
	dst = appendField(dst, e.Time.UTC().AppendFormat(tb[:0], time.RFC3339Nano))
	dst = appendField(dst, e.Principal)
	dst = appendField(dst, e.PrevHash)
	dst = appendField(dst, strconv.AppendUint(nb[:0], e.PrevSeq, 10))
	return appendField(dst, data)
}

// appendField appends one length-prefixed field.
func appendField[T ~string | ~[]byte](dst []byte, f T) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(f)))
	return append(dst, f...)
}

// signingSize bounds the length of e's signing bytes.
func signingSize(e Event) int {
	const fields, fixed = 12, len(signingDomain) + 20 + 40 + 20 + 2 // domain, version, time, prevseq, "{}"
	return fields*binary.MaxVarintLen64 + fixed + len(e.ID) + len(e.Name) + len(e.Source) + len(e.JobID) +
		len(e.Route) + len(e.Principal) + len(e.PrevHash) + len(e.Data)
}
