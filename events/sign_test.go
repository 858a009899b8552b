package events_test

import (
	"context"
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/events/eventstest"
	"github.com/nats-io/nats.go/jetstream"
)

func signingKey(t testing.TB, g events.Grant) *events.SigningKey {
	t.Helper()
	seed, err := events.NewSeed()
	if err != nil {
		t.Fatal(err)
	}
	k, err := events.NewSigningKey(seed, g)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// signedBody is e signed by k and encoded as the store writes it.
func signedBody(t testing.TB, k *events.SigningKey, e events.Event) []byte {
	t.Helper()
	if e.Source == "" {
		e.Source = events.SourcePrefix + string(k.Grant().Role) + "/test"
	}
	k.Sign(&e)
	body, err := e.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return body
}

func TestSignedEventVerifies(t *testing.T) {
	exec := signingKey(t, events.Grant{Role: events.RoleExecutor, Clusters: []string{"hpc1"}})
	var ring events.Keyring
	if err := ring.Add(exec.PublicKey(), exec.Grant()); err != nil {
		t.Fatal(err)
	}
	id := events.NewID()
	e, _ := events.New(id, events.Started, "hpc1", t0, events.StartedData{NativeID: "42"})
	e.PrevSeq, e.PrevHash, e.Principal = 7, strings.Repeat("a", 64), `al"ice` // an escape: the SDK's decoder
	body := signedBody(t, exec, e)
	st := events.State{JobID: id, Cluster: "hpc1"}
	if g, err := ring.Verify(body, "hpc1", st); err != nil || g.Role != events.RoleExecutor {
		t.Fatalf("a signed event does not verify: %v (%v)", err, g)
	}
	decoded, err := events.Decode(body)
	if err != nil || decoded.Signer != exec.PublicKey() || decoded.Signature == "" {
		t.Fatalf("decoded %+v (%v): signer and signature not read back", decoded, err)
	}
	// Whatever a forger changes, the signature no longer holds.
	for name, change := range map[string]func(string) string{
		"data":       func(b string) string { return strings.Replace(b, `"native_id":"42"`, `"native_id":"43"`, 1) },
		"data blank": func(b string) string { return strings.Replace(b, `"native_id":"42"`, `"native_id": "42"`, 1) },
		"prevhash":   func(b string) string { return strings.Replace(b, strings.Repeat("a", 64), strings.Repeat("b", 64), 1) },
		"prevseq":    func(b string) string { return strings.Replace(b, `"prevseq":"7"`, `"prevseq":"8"`, 1) },
		"source":     func(b string) string { return strings.Replace(b, "executor/test", "executor/tesx", 1) },
	} {
		forged := change(string(body))
		if forged == string(body) {
			t.Fatalf("%s: the change did not apply to %s", name, body)
		}
		if _, err := ring.Verify([]byte(forged), "hpc1", st); !errors.Is(err, events.ErrBadSignature) {
			t.Errorf("%s changed: %v, want a bad signature", name, err)
		}
	}
	if _, err := ring.Verify(body, "local", st); !errors.Is(err, events.ErrBadSignature) {
		t.Errorf("stored under another route: %v, want a bad signature", err)
	}
	// The data is written as a JSON value; the same event with its data in data_base64,
	// as bodies were written before, verifies the same (the signature covers the data's
	// bytes, not their spelling), and a change to the base64 data does not.
	asJSON := `"data":` + string(e.Data)
	if !strings.Contains(string(body), asJSON) {
		t.Fatalf("the data is not written as a JSON value: %s", body)
	}
	old := strings.Replace(string(body), asJSON, `"data_base64":"`+base64.StdEncoding.EncodeToString(e.Data)+`"`, 1)
	if _, err := ring.Verify([]byte(old), "hpc1", st); err != nil {
		t.Errorf("the event in the old spelling does not verify: %v\n%s", err, old)
	}
	oldForged := strings.Replace(string(body), asJSON,
		`"data_base64":"`+base64.StdEncoding.EncodeToString([]byte(strings.Replace(string(e.Data), "42", "43", 1)))+`"`, 1)
	if _, err := ring.Verify([]byte(oldForged), "hpc1", st); !errors.Is(err, events.ErrBadSignature) {
		t.Errorf("changed data in the old spelling: %v, want a bad signature", err)
	}
}

// external is e as another system's fact: its source and the principal who published it.
func external(e events.Event, source, principal string) events.Event {
	e.Source, e.Principal = source, principal
	return e
}

func TestVerifyRefusesUnsignedUnknownAndUnentitled(t *testing.T) {
	inc := signingKey(t, events.Grant{Role: events.RoleIncarnator})
	ingest := signingKey(t, events.Grant{Role: events.RoleIngest})
	exec := signingKey(t, events.Grant{Role: events.RoleExecutor, Clusters: []string{"hpc1"}})
	watcher := signingKey(t, events.Grant{Role: events.RoleWatcher})
	stranger := signingKey(t, events.Grant{Role: events.RoleWatcher})
	var ring events.Keyring
	for _, k := range []*events.SigningKey{inc, ingest, exec, watcher} {
		if err := ring.Add(k.PublicKey(), k.Grant()); err != nil {
			t.Fatal(err)
		}
	}
	id := events.NewID()
	onHPC1 := events.State{JobID: id, Cluster: "hpc1"}
	onLocal := events.State{JobID: id, Cluster: "local"}
	ev := func(name events.Name, route string) events.Event {
		e, err := events.New(id, name, route, t0, events.Note{})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	unsigned := ev(events.Succeeded, "")
	unsigned.Source = "mallory"
	plain, _ := unsigned.Encode()
	cases := []struct {
		name  string
		body  []byte
		route string
		st    events.State
		want  error
	}{
		{"unsigned", plain, "", onHPC1, events.ErrUnsigned},
		{"a key nobody listed", signedBody(t, stranger, ev(events.Succeeded, "")), "", onHPC1, events.ErrUnknownKey},
		{"incarnator writes succeeded", signedBody(t, inc, ev(events.Succeeded, "")), "", onHPC1, events.ErrNoRight},
		{"ingest routes work to a cluster", signedBody(t, ingest, ev(events.CancelRequested, "hpc1")), "hpc1", onHPC1, events.ErrNoRight},
		{"hpc1's executor starts a job on local", signedBody(t, exec, ev(events.Started, "local")), "local", onLocal, events.ErrNoRight},
		{"hpc1's executor fails a job placed on local", signedBody(t, exec, ev(events.Failed, "")), "", onLocal, events.ErrNoRight},
		{"hpc1's executor fails its own job", signedBody(t, exec, ev(events.Failed, "")), "", onHPC1, nil},
		{"ingest records an external fact", signedBody(t, ingest, external(ev(events.Exited, ""), "urn:site:a", "alice")), "", onLocal, nil},
		{"ingest records a fact under the watcher's source", signedBody(t, ingest, external(ev(events.Succeeded, ""), "gridwire/watcher/host-1", "alice")), "", onLocal, events.ErrNoRight},
		{"ingest records a fact nobody published", signedBody(t, ingest, external(ev(events.Succeeded, ""), "urn:site:a", "")), "", onLocal, events.ErrNoRight},
		{"the watcher writes under the executor's source", signedBody(t, watcher, external(ev(events.Succeeded, ""), "gridwire/executor/host-1", "")), "", onLocal, events.ErrNoRight},
		{"ingest submits a group's parent", signedBody(t, ingest, ev(events.Submitted, events.RouteGroup)), events.RouteGroup, events.State{}, nil},
		{"ingest routes an exit to the groups' route", signedBody(t, ingest, ev(events.Exited, events.RouteGroup)), events.RouteGroup, onLocal, events.ErrNoRight},
	}
	for _, c := range cases {
		_, err := ring.Verify(c.body, c.route, c.st)
		if c.want == nil && err != nil || c.want != nil && !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
}

func TestKeyringRefusesMalformedKeys(t *testing.T) {
	var ring events.Keyring
	k := signingKey(t, events.Grant{Role: events.RoleStager})
	for _, c := range []struct {
		pub  string
		role events.Role
	}{{"not-a-key", events.RoleStager}, {k.PublicKey(), "janitor"}, {strings.Replace(k.PublicKey(), "U", "N", 1), events.RoleStager}} {
		if err := ring.Add(c.pub, events.Grant{Role: c.role}); !errors.Is(err, events.ErrBadKey) {
			t.Errorf("Add(%q, %s): %v", c.pub, c.role, err)
		}
	}
	if err := ring.Add(k.PublicKey(), events.Grant{Role: events.RoleStager}); err != nil {
		t.Fatal(err)
	}
	if err := ring.Add(k.PublicKey(), events.Grant{Role: events.RoleWatcher}); !errors.Is(err, events.ErrBadKey) {
		t.Errorf("one key for two roles: %v", err)
	}
	if _, err := events.NewSigningKey([]byte("SUnot-a-seed"), events.Grant{Role: events.RoleStager}); !errors.Is(err, events.ErrBadKey) {
		t.Errorf("a malformed seed: %v", err)
	}
}

// A store with a role key signs what it appends and refuses, before writing, what its
// role may not write.
func TestStoreSignsAndRefusesWhatItsRoleMayNotWrite(t *testing.T) {
	b, _ := eventstest.Open(t, "test/unsigned")
	ingestKey := signingKey(t, events.Grant{Role: events.RoleIngest})
	incKey := signingKey(t, events.Grant{Role: events.RoleIncarnator})
	ingest := events.NewStore(b.Conn, b.JS, "gridwire/ingest/test", events.WithSigningKey(ingestKey))
	inc := events.NewStore(b.Conn, b.JS, "gridwire/incarnator/test", events.WithSigningKey(incKey))
	ctx := context.Background()
	id := events.NewID()
	if _, err := ingest.Create(ctx, submitted(t, id)); err != nil {
		t.Fatal(err)
	}
	if _, err := inc.Decide(ctx, id, func(s events.State) ([]events.Event, error) {
		e, err := events.New(id, events.Succeeded, "", t0, events.Note{})
		return []events.Event{e}, err
	}); !errors.Is(err, events.ErrNoRight) {
		t.Fatalf("the incarnator appended succeeded: %v", err)
	}
	if _, err := inc.Decide(ctx, id, func(s events.State) ([]events.Event, error) {
		e, err := events.New(id, events.Incarnated, "local", t0, events.IncarnatedData{Cluster: "local"})
		return []events.Event{e}, err
	}); err != nil {
		t.Fatal(err)
	}
	h, err := ingest.Load(ctx, id)
	if err != nil || len(h.Events) != 2 {
		t.Fatalf("history %v (%v)", h.Events, err)
	}
	bulk := events.NewID()
	if _, errs := ingest.CreateAll(ctx, []events.Event{submitted(t, bulk)}); errs[0] != nil {
		t.Fatal(errs[0])
	}
	hb, err := ingest.Load(ctx, bulk)
	if err != nil || len(hb.Events) != 1 {
		t.Fatalf("bulk history %v (%v)", hb.Events, err)
	}
	h.Events = append(h.Events, hb.Events...)
	var ring events.Keyring
	_ = ring.Add(ingestKey.PublicKey(), ingestKey.Grant())
	_ = ring.Add(incKey.PublicKey(), incKey.Grant())
	stream, err := b.JS.Stream(ctx, events.Stream)
	if err != nil {
		t.Fatal(err)
	}
	verifyAsStored(t, stream, &ring, h.Events)
}

// verifyAsStored checks each event's signature on the bytes the stream holds for it,
// against its job's state before it.
func verifyAsStored(t *testing.T, stream jetstream.Stream, ring *events.Keyring, evs []events.Event) {
	t.Helper()
	states := map[string]events.State{}
	for _, e := range evs {
		m, err := stream.GetMsg(context.Background(), e.Seq)
		if err != nil {
			t.Fatal(err)
		}
		st := states[e.JobID]
		if _, err := ring.Verify(m.Data, e.Route, st); err != nil {
			t.Errorf("job %s, %s at %d as stored: %v", e.JobID, e.Name, e.Seq, err)
		}
		if states[e.JobID], err = events.Apply(st, e); err != nil {
			t.Fatal(err)
		}
	}
}

// BenchmarkSign is the cost signing adds to an append: building the signed bytes and one
// ed25519 signature.
func BenchmarkSign(b *testing.B) {
	k := signingKey(b, events.Grant{Role: events.RoleExecutor})
	e, _ := events.New(events.NewID(), events.Started, "local", t0, events.StartedData{NativeID: "12345"})
	e.Source, e.PrevSeq, e.PrevHash = "gridwire/executor/host-1", 1234, strings.Repeat("a", 64)
	b.ReportAllocs()
	for b.Loop() {
		k.Sign(&e)
	}
}

// BenchmarkEncodeSigned is Encode of a signed event beside BenchmarkEncodeUnsigned.
func BenchmarkEncodeSigned(b *testing.B)   { benchEncode(b, true) }
func BenchmarkEncodeUnsigned(b *testing.B) { benchEncode(b, false) }

func benchEncode(b *testing.B, signed bool) {
	k := signingKey(b, events.Grant{Role: events.RoleExecutor})
	e, _ := events.New(events.NewID(), events.Started, "local", t0, events.StartedData{NativeID: "12345"})
	e.Source, e.PrevSeq, e.PrevHash = "gridwire/executor/host-1", 1234, strings.Repeat("a", 64)
	b.ReportAllocs()
	for b.Loop() {
		if signed {
			k.Sign(&e)
		}
		if _, err := e.Encode(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkVerify is what the audit spends per signed event.
func BenchmarkVerify(b *testing.B) {
	k := signingKey(b, events.Grant{Role: events.RoleExecutor})
	var ring events.Keyring
	_ = ring.Add(k.PublicKey(), k.Grant())
	e, _ := events.New(events.NewID(), events.Started, "local", t0, events.StartedData{NativeID: "12345"})
	body := signedBody(b, k, e)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ring.Verify(body, "local", events.State{}); err != nil {
			b.Fatal(err)
		}
	}
}

// Ingest writes a parent record's submission under RouteGroup (and nothing else routed);
// the watcher writes restarted.
func TestRightsOfSessionsAndRestarts(t *testing.T) {
	id := events.NewID()
	parent, _ := events.New(id, events.Submitted, events.RouteGroup, t0, events.Job{ID: id, Kind: events.KindGroup})
	if err := (events.Grant{Role: events.RoleIngest}).May(parent, events.State{}); err != nil {
		t.Fatalf("ingest may not submit a parent under %s: %v", events.RouteGroup, err)
	}
	queued, _ := events.New(id, events.Queued, events.RouteGroup, t0, events.QueuedData{})
	if err := (events.Grant{Role: events.RoleIngest}).May(queued, events.State{}); !errors.Is(err, events.ErrNoRight) {
		t.Fatalf("ingest routed a queued event: %v, want refused", err)
	}
	restarted, _ := events.New(id, events.Restarted, "", t0, events.RestartedData{Attempt: 2, Of: 2})
	if err := (events.Grant{Role: events.RoleWatcher}).May(restarted, events.State{}); err != nil {
		t.Fatalf("the watcher may not restart: %v", err)
	}
	if err := (events.Grant{Role: events.RoleExecutor}).May(restarted, events.State{}); !errors.Is(err, events.ErrNoRight) {
		t.Fatalf("the executor restarted: %v, want refused", err)
	}
}
