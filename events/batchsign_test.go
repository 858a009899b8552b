package events_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/events/eventstest"
)

// batch is n submitted events of fresh jobs, complete as a store stamps them.
func batch(t testing.TB, n int) []events.Event {
	t.Helper()
	evs := make([]events.Event, n)
	for i := range evs {
		id := events.NewID()
		e, err := events.New(id, events.Submitted, "", t0, events.Job{ID: id, Executable: "/bin/true", Submitter: "alice"})
		if err != nil {
			t.Fatal(err)
		}
		e.Source = events.SourcePrefix + "ingest/test"
		evs[i] = e
	}
	return evs
}

func encode(t testing.TB, e events.Event) []byte {
	t.Helper()
	body, err := e.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return body
}

func ringOf(t testing.TB, keys ...*events.SigningKey) *events.Keyring {
	t.Helper()
	var ring events.Keyring
	for _, k := range keys {
		if err := ring.Add(k.PublicKey(), k.Grant()); err != nil {
			t.Fatal(err)
		}
	}
	return &ring
}

// Every event of a batch verifies alone, whatever the batch's size (the last node of an
// odd level is carried up), and a batch of up to 64 shares one root signature.
func TestBatchSignedEventsVerify(t *testing.T) {
	k := signingKey(t, events.Grant{Role: events.RoleIngest})
	ring := ringOf(t, k)
	for _, n := range []int{1, 2, 3, 5, 7, 63, 64, 65, 130} {
		evs := batch(t, n)
		k.SignAll(evs)
		roots := map[string]bool{}
		for i, e := range evs {
			if e.Signer != k.PublicKey() {
				t.Fatalf("n=%d: event %d signed by %q", n, i, e.Signer)
			}
			roots[strings.Split(e.Signature, ".")[0]] = true
			if _, err := ring.Verify(encode(t, e), "", events.State{}); err != nil {
				t.Fatalf("n=%d: event %d of the batch: %v", n, i, err)
			}
		}
		if want := (n + 63) / 64; len(roots) != want {
			t.Errorf("n=%d: %d signatures, want %d (one per 64 events)", n, len(roots), want)
		}
		if n == 1 && strings.Contains(evs[0].Signature, ".") {
			t.Errorf("an event alone got a batch signature %q, want its own", evs[0].Signature)
		}
	}
}

// setPart replaces part i of a batch signature.
func setPart(sig string, i int, v string) string {
	parts := strings.Split(sig, ".")
	parts[i] = v
	return strings.Join(parts, ".")
}

// What issue 18 demanded of every signature holds for a batch's: an altered event, an
// event the batch does not hold, a forged or re-pointed root, a signer without the right
// to one of the batch's events, and a signature of one kind passed off as the other all
// fail verification.
func TestBatchSignatureRefusesForgeries(t *testing.T) {
	ingest := signingKey(t, events.Grant{Role: events.RoleIngest})
	stranger := signingKey(t, events.Grant{Role: events.RoleIngest})
	ring := ringOf(t, ingest)
	evs := batch(t, 5)
	outsider := batch(t, 1)[0]
	// A batch with an event ingest may not write: a routed started.
	started, _ := events.New(evs[4].JobID, events.Started, "hpc1", t0, events.StartedData{NativeID: "1"})
	started.Source = evs[4].Source
	evs[4] = started
	ingest.SignAll(evs)
	strangers := batch(t, 3)
	stranger.SignAll(strangers)
	single := batch(t, 1)[0]
	ingest.Sign(&single)

	altered := evs[1]
	altered.Data = []byte(strings.Replace(string(altered.Data), "/bin/true", "/bin/evil", 1))
	notListed := outsider
	notListed.Signer, notListed.Signature = evs[1].Signer, evs[1].Signature
	otherPlace := evs[1]
	otherPlace.Signature = setPart(evs[1].Signature, 1, "2")
	otherCount := evs[1]
	otherCount.Signature = setPart(evs[1].Signature, 2, "6")
	forgedRoot := evs[1]
	sig, _ := base64.RawURLEncoding.DecodeString(strings.Split(evs[1].Signature, ".")[0])
	sig[7] ^= 1
	forgedRoot.Signature = setPart(evs[1].Signature, 0, base64.RawURLEncoding.EncodeToString(sig))
	// A stranger's batch claiming a trusted signer: its root signature is the stranger's.
	claimed := strangers[0]
	claimed.Signer = ingest.PublicKey()
	// A root signature alone, as if it were the event's own.
	rootAsOwn := evs[1]
	rootAsOwn.Signature = strings.Split(evs[1].Signature, ".")[0]
	// An event's own signature as the root of a batch of two holding it.
	leaf := sha256.Sum256([]byte("anything"))
	ownAsRoot := single
	ownAsRoot.Signature = strings.Join([]string{single.Signature, "0", "2", base64.RawURLEncoding.EncodeToString(leaf[:])}, ".")
	unsigned := evs[2]
	unsigned.Signer, unsigned.Signature = "", ""

	cases := []struct {
		name string
		e    events.Event
		want error
	}{
		{"altered after signing", altered, events.ErrBadSignature},
		{"not in the batch", notListed, events.ErrBadSignature},
		{"another place in the batch", otherPlace, events.ErrBadSignature},
		{"another count", otherCount, events.ErrBadSignature},
		{"a forged root signature", forgedRoot, events.ErrBadSignature},
		{"a stranger's batch claiming a trusted signer", claimed, events.ErrBadSignature},
		{"a stranger's batch", strangers[1], events.ErrUnknownKey},
		{"a root signature as the event's own", rootAsOwn, events.ErrBadSignature},
		{"an event's own signature as a root", ownAsRoot, events.ErrBadSignature},
		{"unsigned", unsigned, events.ErrUnsigned},
		{"an event the batch's signer may not write", evs[4], events.ErrNoRight},
		{"the batch's other events", evs[3], nil},
		{"an event signed alone", single, nil},
	}
	for _, c := range cases {
		route := c.e.Route
		_, err := ring.Verify(encode(t, c.e), route, events.State{})
		if c.want == nil && err != nil || c.want != nil && !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	// Malformed batch signatures are bad signatures, not panics.
	for _, s := range []string{"a.b", "x.0.2.", evs[1].Signature + ".x", setPart(evs[1].Signature, 1, "01"),
		setPart(evs[1].Signature, 1, "-1"), setPart(evs[1].Signature, 1, "5"), setPart(evs[1].Signature, 2, "1"),
		setPart(evs[1].Signature, 2, "99999"), setPart(evs[1].Signature, 3, "AAAA"), setPart(evs[1].Signature, 3, "")} {
		e := evs[1]
		e.Signature = s
		if _, err := ring.Verify(encode(t, e), "", events.State{}); !errors.Is(err, events.ErrBadSignature) {
			t.Errorf("signature %q: %v, want a bad signature", s, err)
		}
	}
}

// A root verified once is remembered with its signature: the same root under another
// signature is checked, not waved through.
func TestBatchRootCacheKeepsTheSignature(t *testing.T) {
	k := signingKey(t, events.Grant{Role: events.RoleIngest})
	ring := ringOf(t, k)
	evs := batch(t, 4)
	k.SignAll(evs)
	if _, err := ring.Verify(encode(t, evs[0]), "", events.State{}); err != nil {
		t.Fatal(err)
	}
	sig, _ := base64.RawURLEncoding.DecodeString(strings.Split(evs[1].Signature, ".")[0])
	sig[0] ^= 0x80
	forged := evs[1]
	forged.Signature = setPart(evs[1].Signature, 0, base64.RawURLEncoding.EncodeToString(sig))
	if _, err := ring.Verify(encode(t, forged), "", events.State{}); !errors.Is(err, events.ErrBadSignature) {
		t.Fatalf("a known root under a forged signature: %v", err)
	}
	if _, err := ring.Verify(encode(t, evs[1]), "", events.State{}); err != nil {
		t.Fatalf("the batch's next event: %v", err)
	}
}

// A signing store's CreateAll signs in batches what it stores, each stored body verifies,
// and an event the key's role may not write is refused without touching the others.
func TestCreateAllSignsInBatches(t *testing.T) {
	b, _ := eventstest.Open(t, "test/unsigned")
	k := signingKey(t, events.Grant{Role: events.RoleIngest})
	st := events.NewStore(b.Conn, b.JS, "gridwire/ingest/test", events.WithSigningKey(k))
	ring := ringOf(t, k)
	ctx := context.Background()
	evs := batch(t, 600) // two windows of the store, ten batches
	routed, _ := events.New(events.NewID(), events.Submitted, "hpc1", t0, events.Job{Executable: "/bin/true"})
	evs[70] = routed
	seqs, errs := st.CreateAll(ctx, evs)
	stream, err := b.JS.Stream(ctx, events.Stream)
	if err != nil {
		t.Fatal(err)
	}
	roots := map[string]bool{}
	for i := range evs {
		if i == 70 {
			if !errors.Is(errs[i], events.ErrNoRight) {
				t.Fatalf("ingest submitted to cluster hpc1: %v, want refused", errs[i])
			}
			continue
		}
		if errs[i] != nil {
			t.Fatalf("job %d: %v", i, errs[i])
		}
		m, err := stream.GetMsg(ctx, seqs[i])
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ring.Verify(m.Data, "", events.State{}); err != nil {
			t.Fatalf("job %d as stored: %v", i, err)
		}
		e, _ := events.Decode(m.Data)
		roots[strings.Split(e.Signature, ".")[0]] = true
	}
	if len(roots) != 10 {
		t.Errorf("%d root signatures for 599 events in windows of 512, want 10", len(roots))
	}
	if h, _ := st.Load(ctx, routed.JobID); len(h.Events) != 0 {
		t.Errorf("the refused event was stored: %v", h.Events)
	}
}

// FuzzBatchSignature: whatever a batch signature is changed into, verifying it never
// panics, and only the signature SignAll wrote verifies (one spelling for each batch).
func FuzzBatchSignature(f *testing.F) {
	k := signingKey(f, events.Grant{Role: events.RoleIngest})
	ring := ringOf(f, k)
	evs := batch(f, 5)
	k.SignAll(evs)
	e := evs[4]
	f.Add(e.Signature)
	f.Add(evs[1].Signature)
	f.Add(setPart(e.Signature, 3, ""))
	f.Add("..." + e.Signature)
	f.Fuzz(func(t *testing.T, sig string) {
		forged := e
		forged.Signature = sig
		body, err := forged.Encode()
		if err != nil {
			return
		}
		if _, err := ring.Verify(body, "", events.State{}); err == nil && sig != e.Signature {
			t.Fatalf("signature %q verifies, but only %q was written for this event", sig, e.Signature)
		}
	})
}

// BenchmarkSignAll is signing's cost per event of a bulk append.
func BenchmarkSignAll(b *testing.B) {
	k := signingKey(b, events.Grant{Role: events.RoleIngest})
	evs := batch(b, 512)
	b.ReportAllocs()
	for b.Loop() {
		k.SignAll(evs)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(evs)), "ns/event")
}

// BenchmarkVerifyBatch is the audit's cost per event of a batch-signed log: each event's
// path checked, each batch's root signature verified once.
func BenchmarkVerifyBatch(b *testing.B) {
	k := signingKey(b, events.Grant{Role: events.RoleIngest})
	evs := batch(b, 512)
	k.SignAll(evs)
	bodies := make([][]byte, len(evs))
	for i, e := range evs {
		bodies[i] = encode(b, e)
	}
	b.ReportAllocs()
	for b.Loop() {
		ring := ringOf(b, k) // an audit starts with no root verified
		for _, body := range bodies {
			if _, err := ring.Verify(body, "", events.State{}); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(bodies)), "ns/event")
}

// SigningBytes never changes for an event already signed: a log's stored signatures
// must keep verifying. The digests were taken from the first version of SigningBytes.
func TestSigningBytesAreStable(t *testing.T) {
	e := events.Event{ID: "01JDQ0000000000000000000EV", Name: events.Started, JobID: "01JDQ0000000000000000000JB",
		Source: "gridwire/executor/host-1", Route: "hpc1", Time: time.Date(2026, 11, 23, 16, 30, 0, 123456789, time.UTC),
		Principal: "alice", PrevHash: "ab", PrevSeq: 41, Data: []byte(`{"native_id":"42"}`)}
	if got := fmt.Sprintf("%x", sha256.Sum256(events.SigningBytes(e, 1))); got != "d166cb2c5b46279d78a58066049c6f8de56eb0300f3d3768a5c6a656c4dbbfb2" {
		t.Errorf("signing bytes of a started event changed: sha256 %s", got)
	}
	e.Data, e.Route, e.PrevSeq = nil, "", 0
	if got := fmt.Sprintf("%x", sha256.Sum256(events.SigningBytes(e, 2))); got != "3df6ce6b5e260673b932c78e2fd7f2156e4473e3db9b31e8ed02abca9be800a8" {
		t.Errorf("signing bytes of an event without data, route or link changed: sha256 %s", got)
	}
}
