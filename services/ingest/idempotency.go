package ingest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"unicode"

	"github.com/gridwire/gridwire/events"
	"github.com/nats-io/nats.go/jetstream"
)

// HeaderIdempotencyKey carries a submission's idempotency key over HTTP and NATS.
const HeaderIdempotencyKey = "Idempotency-Key"

// KeyBucket is the KV bucket of idempotency keys: for each (submitter, key), the job IDs
// its submission created and a hash of the description. Entries never expire, so a
// retry is safe long after the stream's duplicate window; every entry can be rebuilt
// from the submitted events, which carry their key.
const KeyBucket = "gridwire-idempotency"

// maxKeyLen bounds an idempotency key.
const maxKeyLen = 255

// ErrKeyReused is returned when a key comes back with a different description.
var ErrKeyReused = errors.New("ingest: idempotency key already used for a different description")

// KeyRecord is what a key stands for.
type KeyRecord struct {
	Jobs []string `json:"jobs"` // the IDs of the jobs it created, in submission order
	Hash string   `json:"hash"` // SHA-256 of the description
}

// Keys records idempotency keys. Reserve stores rec under key unless the key already
// has a record, and returns the record that holds (rec, or the earlier one).
type Keys interface {
	Reserve(ctx context.Context, key string, rec KeyRecord) (KeyRecord, error)
}

// CheckKey reports whether k may be used as an idempotency key.
func CheckKey(k string) error {
	if len(k) > maxKeyLen {
		return fmt.Errorf("%w: idempotency key of %d bytes, at most %d", ErrInvalid, len(k), maxKeyLen)
	}
	for _, r := range k {
		if r > unicode.MaxASCII || !unicode.IsPrint(r) {
			return fmt.Errorf("%w: idempotency key: only printable ASCII", ErrInvalid)
		}
	}
	return nil
}

// reserve gives jobs the IDs the submission's key stands for: the ones they have when
// the key is new, else those recorded by the first submission with it.
func (s *Service) reserve(ctx context.Context, sub Submission, jobs []events.Job) error {
	if err := CheckKey(sub.IdempotencyKey); err != nil {
		return err
	}
	if s.deps.Keys == nil {
		return fmt.Errorf("%w: this server keeps no idempotency keys", ErrInvalid)
	}
	sum := sha256.Sum256(sub.Data)
	rec := KeyRecord{Hash: hex.EncodeToString(sum[:])}
	for _, j := range jobs {
		rec.Jobs = append(rec.Jobs, j.ID)
	}
	scoped := sha256.Sum256([]byte(sub.Submitter + "\x00" + sub.IdempotencyKey))
	got, err := s.deps.Keys.Reserve(ctx, hex.EncodeToString(scoped[:]), rec)
	if err != nil {
		return fmt.Errorf("recording idempotency key: %w", err)
	}
	if got.Hash != rec.Hash || len(got.Jobs) != len(jobs) {
		return ErrKeyReused
	}
	linkIDs(jobs, sub.Submitter, got.Jobs)
	for i := range jobs {
		jobs[i].IdempotencyKey = sub.IdempotencyKey
	}
	return nil
}

// KVKeys keeps idempotency keys in KeyBucket, made with as many replicas as the log.
type KVKeys struct{ JS jetstream.JetStream }

// Reserve implements Keys with the bucket's create-if-absent.
func (k KVKeys) Reserve(ctx context.Context, key string, rec KeyRecord) (KeyRecord, error) {
	kv, err := events.Ensure(ctx, func(ctx context.Context) (jetstream.KeyValue, error) {
		kv, err := k.JS.KeyValue(ctx, KeyBucket)
		if !errors.Is(err, jetstream.ErrBucketNotFound) {
			return kv, err
		}
		replicas, err := events.Replicas(ctx, k.JS)
		if err != nil {
			return nil, err
		}
		kv, err = k.JS.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: KeyBucket, Storage: jetstream.FileStorage,
			Replicas: replicas, Description: "gridwire submissions by idempotency key"})
		if errors.Is(err, jetstream.ErrBucketExists) { // another submission made it first
			return k.JS.KeyValue(ctx, KeyBucket)
		}
		return kv, err
	})
	if err != nil {
		return KeyRecord{}, err
	}
	b, err := json.Marshal(rec)
	if err != nil {
		return KeyRecord{}, err
	}
	if _, err := kv.Create(ctx, key, b); err == nil {
		return rec, nil
	} else if !errors.Is(err, jetstream.ErrKeyExists) {
		return KeyRecord{}, err
	}
	e, err := kv.Get(ctx, key)
	if err != nil {
		return KeyRecord{}, err
	}
	var had KeyRecord
	if err := json.Unmarshal(e.Value(), &had); err != nil {
		return KeyRecord{}, fmt.Errorf("idempotency record %s: %w", key, err)
	}
	return had, nil
}
