package readside

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/pkg/bus"
)

// roleKeys is one signing key per role (the executor's for cluster c1 only), their
// keyring and a store per role.
type roleKeys struct {
	keys   map[events.Role]*events.SigningKey
	stores map[events.Role]*events.Store
	ring   *events.Keyring
}

func newRoleKeys(t *testing.T, b *bus.Bus) roleKeys {
	t.Helper()
	rk := roleKeys{keys: map[events.Role]*events.SigningKey{}, stores: map[events.Role]*events.Store{}, ring: &events.Keyring{}}
	for _, role := range events.Roles() {
		g := events.Grant{Role: role}
		if role == events.RoleExecutor {
			g.Clusters = []string{"c1"}
		}
		seed, err := events.NewSeed()
		if err != nil {
			t.Fatal(err)
		}
		k, err := events.NewSigningKey(seed, g)
		if err != nil {
			t.Fatal(err)
		}
		if err := rk.ring.Add(k.PublicKey(), g); err != nil {
			t.Fatal(err)
		}
		rk.keys[role] = k
		rk.stores[role] = events.NewStore(b.Conn, b.JS, events.SourcePrefix+string(role)+"/test", events.WithSigningKey(k))
	}
	return rk
}

// owner is the role that writes each step of eventstest.Life.
var owner = map[events.Name]events.Role{
	events.Submitted: events.RoleIngest, events.Incarnated: events.RoleIncarnator, events.StagingIn: events.RoleStager,
	events.Transfer: events.RoleStager, events.Queued: events.RoleStager, events.Started: events.RoleExecutor,
	events.StatusChanged: events.RoleWatcher, events.Exited: events.RoleWatcher, events.StagedOut: events.RoleStager,
	events.Succeeded: events.RoleWatcher, events.Failed: events.RoleWatcher,
}

// playSigned plays steps, each through the store of the role that writes it.
func (rk roleKeys) playSigned(t *testing.T, id string, steps []step) {
	t.Helper()
	for i, s := range steps {
		play(t, rk.stores[owner[s.Name]], id, t0.Add(time.Duration(i)*time.Second), []step{s})
	}
}

// S7's second half: an event that got past the permissions, correctly chained, is still
// caught by the audit when its signature or its signer's right does not hold.
func TestAuditChecksSignaturesAndRights(t *testing.T) {
	b, unsignedStore := openBus(t)
	ctx := context.Background()
	// A log older than signing: its unsigned events are counted, not broken.
	old := events.NewID()
	play(t, unsignedStore, old, t0, life(old, "c1", 0))
	rk := newRoleKeys(t, b)
	clean, onC2, running, other := events.NewID(), events.NewID(), events.NewID(), events.NewID()
	rk.playSigned(t, clean, life(clean, "c1", 0))
	rk.playSigned(t, onC2, life(onC2, "c2", 1)[:2])
	rk.playSigned(t, running, life(running, "c1", 1)[:8])
	rk.playSigned(t, other, life(other, "c1", 1)[:8])
	rep, err := Audit(ctx, b.JS, "", rk.ring)
	if err != nil || !rep.OK() || rep.Unsigned != 11 || rep.SignedFrom != 12 || rep.Jobs != 5 {
		t.Fatalf("audit of a signed log after an unsigned one: %+v %v", rep, err)
	}

	// Each forgery is chained correctly onto its victim's last event.
	forge := func(victim string, name events.Name, route, source string, sign *events.SigningKey) {
		t.Helper()
		st, err := unsignedStore.State(ctx, victim)
		if err != nil {
			t.Fatal(err)
		}
		e, _ := events.New(victim, name, route, t0.Add(time.Minute), events.EndData{Reason: "forged"})
		e.Source, e.PrevSeq, e.PrevHash, e.Principal = source, st.LastSeq, st.LastHash, "mallory"
		if sign != nil {
			sign.Sign(&e)
		}
		body, err := e.Encode()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.JS.Publish(ctx, events.Subject(victim, name, route), body); err != nil {
			t.Fatal(err)
		}
	}
	stranger, _ := events.NewSeed()
	strangerKey, _ := events.NewSigningKey(stranger, events.Grant{Role: events.RoleWatcher})
	// c1's executor may publish an unrouted failed (its NATS user may), but not for a
	// job placed on c2; nobody may append unsigned after the first signed event; a key
	// nobody listed is nobody's.
	// Ingest records other systems' facts, but never under a gridwire service's source.
	forge(onC2, events.Failed, "", "gridwire/executor/host-1", rk.keys[events.RoleExecutor])
	forge(running, events.Cancelled, "", "gridwire/executor/host-1", nil)
	forge(clean, events.StagedOut, "", "gridwire/watcher/host-1", strangerKey)
	forge(other, events.Succeeded, "", "gridwire/watcher/host-1", rk.keys[events.RoleIngest])
	rep, err = Audit(ctx, b.JS, "", rk.ring)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{onC2: "may not write", running: "unsigned, stored after", clean: "not a trusted key",
		other: "not its own"}
	if len(rep.Broken) != len(want) {
		t.Fatalf("audit found %d broken histories, want %d: %+v", len(rep.Broken), len(want), rep.Broken)
	}
	for _, br := range rep.Broken {
		if !strings.Contains(br.Problem, want[br.Job]) {
			t.Errorf("job %s: %q, want it to say %q", br.Job, br.Problem, want[br.Job])
		}
	}
	// One job alone knows where the log began to be signed.
	if one, _ := Audit(ctx, b.JS, running, rk.ring); len(one.Broken) != 1 || one.SignedFrom != 12 {
		t.Errorf("audit of one job: %+v", one)
	}
}
