package events

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
	"sync"
)

// Batch signatures: a store that appends many events at once (CreateAll) signs them in
// batches of up to batchLeaves with one ed25519 signature each, instead of one per event;
// single appends signed at the same moment are batched the same way (groupsign.go).
// The batch's events are the leaves of a Merkle tree (RFC 9162's hashing: a leaf is
// SHA-256(0x00 || SigningBytes), a node SHA-256(0x01 || left || right), a last node
// without a partner is carried up unchanged); the key signs the tree's root and the
// number of leaves. Each event then carries, in its one signature attribute, that root
// signature, its own place in the batch and its audit path (the sibling hashes from its
// leaf to the root), so it still verifies alone: rebuild its signing bytes, climb the
// path to a root, check the signature over that root. What a verifier concludes is the
// same as for a single signature: the key signed exactly these signing bytes. A batch
// signature is written
//
//	<signature>.<index>.<count>.<path>
//
// with the signature and the path (count-dependent, 32 bytes a level) in unpadded
// base64url, which has no '.', so a plain signature is never mistaken for one. The
// signed bytes begin with their own domain, so a batch root signature never verifies as
// an event's signature, nor the reverse. See docs/security.md for why the batch rides in
// each event rather than in a manifest message of its own.

const (
	// batchLeaves is how many events one batch signature covers: the signing cost per
	// event is one ed25519 signature divided by it, the size per event grows with its
	// logarithm (6 levels, 256 characters of path, at 64).
	batchLeaves = 64
	// maxBatchLeaves bounds the count a verifier accepts (a path of at most 12 levels).
	maxBatchLeaves = 1 << 12
	// batchDomain begins the bytes a batch's root signature covers.
	batchDomain = "gridwire-event-batch-signature-v1"
	// batchSep separates the parts of a batch signature.
	batchSep = "."
)

// SignAll signs evs as Sign signs one event, with one signature per batch of up to
// batchLeaves consecutive events; an event alone in its batch gets Sign's signature.
// Every event must be complete, as for Sign.
func (k *SigningKey) SignAll(evs []Event) {
	for from := 0; from < len(evs); from += batchLeaves {
		k.signBatch(evs[from:min(from+batchLeaves, len(evs))])
	}
}

func (k *SigningKey) signBatch(evs []Event) {
	if len(evs) == 1 {
		k.Sign(&evs[0])
		return
	}
	leaves := make([][sha256.Size]byte, len(evs))
	var buf []byte
	for i := range evs {
		// leafHash's bytes (0x00, then the signing bytes) hashed in one call, without a
		// hash.Hash of its own for every event.
		buf = appendSigningBytes(append(buf[:0], 0), evs[i], evs[i].Name.Version())
		leaves[i] = sha256.Sum256(buf)
	}
	levels := treeLevels(leaves)
	root := levels[len(levels)-1][0]
	head := base64.RawURLEncoding.AppendEncode(nil, ed25519.Sign(k.priv, batchBytes(len(evs), root)))
	count := strconv.Itoa(len(evs))
	var path []byte
	for i := range evs {
		path = auditPath(path[:0], levels, i)
		buf = append(buf[:0], head...)
		buf = strconv.AppendInt(append(buf, batchSep...), int64(i), 10)
		buf = append(append(buf, batchSep...), count...)
		buf = base64.RawURLEncoding.AppendEncode(append(buf, batchSep...), path)
		evs[i].Signer, evs[i].Signature = k.pub, string(buf)
	}
}

// leafHash is a batch leaf: the hash of one event's signing bytes.
func leafHash(signing []byte) [sha256.Size]byte {
	h := sha256.New()
	h.Write([]byte{0})
	h.Write(signing)
	var out [sha256.Size]byte
	h.Sum(out[:0])
	return out
}

// nodeHash joins two subtrees.
func nodeHash(left, right [sha256.Size]byte) [sha256.Size]byte {
	var buf [1 + 2*sha256.Size]byte
	buf[0] = 1
	copy(buf[1:], left[:])
	copy(buf[1+sha256.Size:], right[:])
	return sha256.Sum256(buf[:])
}

// treeLevels builds the tree bottom up: levels[0] are the leaves, the last level is the
// root alone. A level's last node without a partner goes up unchanged, which gives the
// tree RFC 9162 defines (split at the largest power of two below the count).
func treeLevels(leaves [][sha256.Size]byte) [][][sha256.Size]byte {
	levels := [][][sha256.Size]byte{leaves}
	for cur := leaves; len(cur) > 1; {
		next := make([][sha256.Size]byte, 0, (len(cur)+1)/2)
		for i := 0; i < len(cur); i += 2 {
			if i+1 < len(cur) {
				next = append(next, nodeHash(cur[i], cur[i+1]))
			} else {
				next = append(next, cur[i])
			}
		}
		levels = append(levels, next)
		cur = next
	}
	return levels
}

// auditPath appends to path the sibling hashes from leaf i up to the root.
func auditPath(path []byte, levels [][][sha256.Size]byte, i int) []byte {
	for _, level := range levels[:len(levels)-1] {
		switch {
		case i%2 == 1:
			path = append(path, level[i-1][:]...)
		case i+1 < len(level):
			path = append(path, level[i+1][:]...)
		}
		i /= 2
	}
	return path
}

// rootOf climbs from a leaf at index of count leaves along path; ok is false when the
// path does not have exactly the levels that place needs.
func rootOf(leaf [sha256.Size]byte, index, count int, path []byte) (root [sha256.Size]byte, ok bool) {
	h := leaf
	for size := count; size > 1; size = (size + 1) / 2 {
		if index%2 == 1 || index+1 < size { // else: the level's last node, carried up
			if len(path) < sha256.Size {
				return root, false
			}
			sib := [sha256.Size]byte(path[:sha256.Size])
			path = path[sha256.Size:]
			if index%2 == 1 {
				h = nodeHash(sib, h)
			} else {
				h = nodeHash(h, sib)
			}
		}
		index /= 2
	}
	return h, len(path) == 0
}

// batchBytes is what a batch's root signature covers: its domain, the number of leaves
// and the root, the first two length-prefixed as in SigningBytes.
func batchBytes(count int, root [sha256.Size]byte) []byte {
	out := make([]byte, 0, 2*binary.MaxVarintLen64+len(batchDomain)+sha256.Size)
	out = binary.AppendUvarint(out, uint64(len(batchDomain)))
	out = append(out, batchDomain...)
	out = binary.AppendUvarint(out, uint64(count))
	return append(out, root[:]...)
}

// batchSig is a batch signature's parts, parsed.
type batchSig struct {
	sig          []byte
	index, count int
	path         []byte
}

// strict decodes base64url as SignAll writes it: one spelling for each value.
var strict = base64.RawURLEncoding.Strict()

// isBatch reports whether a signature attribute holds a batch signature.
func isBatch(signature string) bool { return strings.Contains(signature, batchSep) }

// parseBatch reads a batch signature, refusing any spelling SignAll does not write.
func parseBatch(s string) (batchSig, error) {
	parts := strings.Split(s, batchSep)
	if len(parts) != 4 {
		return batchSig{}, fmt.Errorf("a batch signature has 4 parts, not %d", len(parts))
	}
	var b batchSig
	var err error
	if b.sig, err = strict.DecodeString(parts[0]); err != nil || len(b.sig) != ed25519.SignatureSize {
		return batchSig{}, fmt.Errorf("the root signature is not an ed25519 signature in base64url")
	}
	if b.index, err = strconv.Atoi(parts[1]); err != nil || strconv.Itoa(b.index) != parts[1] {
		return batchSig{}, fmt.Errorf("index %q is not a number", parts[1])
	}
	if b.count, err = strconv.Atoi(parts[2]); err != nil || strconv.Itoa(b.count) != parts[2] {
		return batchSig{}, fmt.Errorf("count %q is not a number", parts[2])
	}
	if b.count < 2 || b.count > maxBatchLeaves || b.index < 0 || b.index >= b.count {
		return batchSig{}, fmt.Errorf("place %d of %d is not in a batch of 2 to %d", b.index, b.count, maxBatchLeaves)
	}
	if b.path, err = strict.DecodeString(parts[3]); err != nil || len(b.path)%sha256.Size != 0 {
		return batchSig{}, fmt.Errorf("the path is not a list of SHA-256 hashes in base64url")
	}
	return b, nil
}

// verifyBatch checks a batch signature over signing bytes for pub. A root whose
// signature held once for the same signer and signature is not verified again: the
// audit of a batch's events costs one ed25519 verification, not one per event.
func (r *Keyring) verifyBatch(signer string, pub ed25519.PublicKey, signature string, signing []byte) error {
	b, err := parseBatch(signature)
	if err != nil {
		return err
	}
	root, ok := rootOf(leafHash(signing), b.index, b.count, b.path)
	if !ok {
		return fmt.Errorf("the path does not fit place %d of %d", b.index, b.count)
	}
	msg := batchBytes(b.count, root)
	var kb [256]byte
	key := append(append(append(kb[:0], signer...), b.sig...), msg...)
	if r.roots.has(key) {
		return nil
	}
	if !ed25519.Verify(pub, msg, b.sig) {
		return fmt.Errorf("the batch's root signature does not hold")
	}
	r.roots.add(key)
	return nil
}

// rootCache remembers batch roots whose signature held, up to rootCacheSize of them.
type rootCache struct {
	mu   sync.Mutex
	seen map[string]struct{}
}

// rootCacheSize bounds the roots a keyring remembers (about 200 bytes each): an audit
// reads a batch's events together, so a small cache is enough.
const rootCacheSize = 1 << 12

func (c *rootCache) has(key []byte) bool {
	if c == nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.seen[string(key)]
	return ok
}

func (c *rootCache) add(key []byte) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.seen) >= rootCacheSize {
		clear(c.seen)
	}
	c.seen[string(key)] = struct{}{}
}
