package ingest

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/pkg/cluster"
	"github.com/gridwire/gridwire/pkg/httpapi"
	"github.com/nats-io/nats.go"
)

// A submission over NATS is the bearer token's principal's, whatever else it says: a
// client that names admin as its submitter in a header does not become admin.
func TestNATSSubmitterIsTheAuthenticatedCaller(t *testing.T) {
	auth, err := httpapi.NewAuth([]cluster.Token{
		{Token: "sam-token-0123456789", Principal: "sam", Allow: []string{"submit", "read"}},
		{Token: "reader-token-01234567", Principal: "rita", Allow: []string{"read"}},
		{Token: "admin-token-012345678", Principal: "admin", Allow: []string{"submit", "read", "admin"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, token string
		auth        *httpapi.Auth
		status      string
		submitter   string
	}{
		{"no token", "", auth, "401", ""},
		{"an unknown token", "nobody-nobody-nobody", auth, "401", ""},
		{"a token without submit", "reader-token-01234567", auth, "403", ""},
		{"a submitter's token", "sam-token-0123456789", auth, "201", "sam"},
		{"no tokens configured", "", nil, "201", "anonymous"},
	} {
		t.Run(c.name, func(t *testing.T) {
			b, st, _ := externalServer(t, c.auth)
			m := nats.NewMsg(events.SubjectSubmit)
			m.Data = []byte(`{"version":3,"executable":"/bin/true"}`)
			m.Header.Set("Gridwire-Submitter", "admin") // what an old client, or a forger, sends
			if c.token != "" {
				m.Header.Set("Authorization", "Bearer "+c.token)
			}
			var reply *nats.Msg
			eventually(t, "ingest to answer", func() bool {
				reply, err = b.Conn.RequestMsg(m, 5*time.Second)
				return err == nil
			})
			if got := reply.Header.Get("Status-Code"); got != c.status {
				t.Fatalf("status %s %s, want %s", got, reply.Data, c.status)
			}
			var acc Accepted
			_ = json.Unmarshal(reply.Data, &acc)
			if c.submitter == "" {
				if len(acc.Jobs) != 0 {
					t.Fatalf("refused, yet jobs %v", acc.Jobs)
				}
				return
			}
			state, err := st.State(context.Background(), acc.Jobs[0])
			if err != nil || state.Job.Submitter != c.submitter {
				t.Fatalf("job %v submitted by %q (%v), want %q", acc.Jobs, state.Job.Submitter, err, c.submitter)
			}
			h, _ := st.Load(context.Background(), acc.Jobs[0])
			if p := h.Events[0].Principal; p != c.submitter {
				t.Fatalf("submitted event's principal %q, want %q", p, c.submitter)
			}
		})
	}
}

// An external event arrives with a signer and signature of its own: they are not kept,
// the store signs what it appends (here a store without a key, so nothing).
func TestExternalEventsForeignSignatureIsDropped(t *testing.T) {
	_, st, srv := externalServer(t, testAuth(t))
	job := events.NewID()
	var ce map[string]any
	_ = json.Unmarshal(cloudEvent(events.NewID(), job, siteA, events.Submitted, t0, events.Job{ID: job, Executable: "/opt/app"}), &ce)
	ce["signer"], ce["signature"] = "UBNDEYF6DDL5X2FGV6LVF3JSD5QCFUU5M76P3GWRVEN525DVDWGFLRFO", "forged"
	body, _ := json.Marshal(ce)
	if code, out := post(t, srv+"/v1/events", aliceToken, body); code != 201 {
		t.Fatalf("publish: %d %v", code, out)
	}
	h, err := st.Load(context.Background(), job)
	if err != nil || len(h.Events) != 1 || h.Events[0].Signer != "" || h.Events[0].Signature != "" {
		t.Fatalf("stored %+v (%v): the sender's signature was kept", h.Events, err)
	}
}

// Another system may not publish under a gridwire service's source, whatever its token
// lists: the audit would take such an event for the service's own.
func TestExternalEventsRefuseGridwireSources(t *testing.T) {
	auth, err := httpapi.NewAuth([]cluster.Token{{Token: "site-token-0123456789", Principal: "site",
		Allow: []string{"publish"}, Sources: []string{"gridwire/watcher/host-1"}}})
	if err != nil {
		t.Fatal(err)
	}
	_, st, srv := externalServer(t, auth)
	job := events.NewID()
	body := cloudEvent(events.NewID(), job, "gridwire/watcher/host-1", events.Submitted, t0, events.Job{ID: job, Executable: "/opt/app"})
	if code, out := post(t, srv+"/v1/events", "site-token-0123456789", body); code != 403 || errCode(out) != "source_not_allowed" {
		t.Fatalf("publish under a gridwire source: %d %v, want 403 source_not_allowed", code, out)
	}
	if h, _ := st.Load(context.Background(), job); len(h.Events) != 0 {
		t.Fatalf("stored %v", h.Events)
	}
}
