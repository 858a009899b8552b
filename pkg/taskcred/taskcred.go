// Package taskcred issues and checks the credentials running tasks present to the
// gateway's task-side API: one per task, bound to the task's job ID by an HMAC under a
// key every gateway process shares. It owns the key and the token's form; what a task
// may do with its credential (which properties it reads or writes) is the API's to
// decide from the task's own declaration.
package taskcred

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
)

// Bucket is the KV bucket that keeps the key, created on first use. Whoever may read it
// may already write the log itself, so it reveals nothing a NATS client could not do.
const Bucket = "gridwire-secrets"

// keyName is the key's entry in Bucket.
const keyName = "task-credential"

// prefix begins every token: its form's version.
const prefix = "gwt1."

// ErrBadToken is the identity of every refused token.
var ErrBadToken = errors.New("taskcred: not a task credential of this gateway")

// Key issues and verifies task credentials.
type Key struct{ secret []byte }

// New returns a Key over secret (at least 32 bytes).
func New(secret []byte) (Key, error) {
	if len(secret) < 32 {
		return Key{}, fmt.Errorf("taskcred: a key has at least 32 bytes, not %d", len(secret))
	}
	return Key{secret: append([]byte(nil), secret...)}, nil
}

// Open returns the gateway's key, kept in Bucket with the given replicas: the one that
// is there, or a fresh random one that the first process to ask stores (a race between
// two processes is won by one, whose key both then use).
func Open(ctx context.Context, js jetstream.JetStream, replicas int) (Key, error) {
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: Bucket,
		Description: "gridwire secrets: the key of task credentials", Storage: jetstream.FileStorage, Replicas: max(replicas, 1)})
	if err != nil {
		return Key{}, fmt.Errorf("taskcred: bucket %s: %w", Bucket, err)
	}
	for range 3 {
		if e, err := kv.Get(ctx, keyName); err == nil {
			return New(e.Value())
		} else if !errors.Is(err, jetstream.ErrKeyNotFound) {
			return Key{}, fmt.Errorf("taskcred: reading the key: %w", err)
		}
		secret := make([]byte, 32)
		_, _ = rand.Read(secret)
		if _, err := kv.Create(ctx, keyName, secret); err == nil {
			return New(secret)
		} else if !errors.Is(err, jetstream.ErrKeyExists) {
			return Key{}, fmt.Errorf("taskcred: storing a new key: %w", err)
		}
	}
	return Key{}, errors.New("taskcred: the key could neither be read nor stored")
}

// Issue returns the credential of the task with the given job ID.
func (k Key) Issue(jobID string) string {
	return prefix + jobID + "." + base64.RawURLEncoding.EncodeToString(k.mac(jobID))
}

// Verify returns the job ID a credential was issued to.
func (k Key) Verify(token string) (string, error) {
	rest, ok := strings.CutPrefix(token, prefix)
	if !ok || len(k.secret) == 0 {
		return "", ErrBadToken
	}
	id, sig, ok := strings.Cut(rest, ".")
	if !ok || id == "" {
		return "", ErrBadToken
	}
	got, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil || !hmac.Equal(got, k.mac(id)) {
		return "", ErrBadToken
	}
	return id, nil
}

func (k Key) mac(jobID string) []byte {
	m := hmac.New(sha256.New, k.secret)
	m.Write([]byte("gridwire task credential\x00" + jobID))
	return m.Sum(nil)
}
