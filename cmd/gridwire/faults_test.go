package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/pkg/cluster"
	"github.com/gridwire/gridwire/pkg/natsfault"
	"github.com/gridwire/gridwire/services/ingest"
)

// R10: every service of the pipeline, and the submissions, talk to NATS through a client
// that drops 1% of publishes before the stream sees them, loses the acknowledgement of
// 1% (the event is stored, the writer sees a timeout) and fails 1% of consumer acks (the
// event is delivered again). The publish faults reach both ways an event is written: the
// stores' own appends (events.WithPublishFaults) and the JetStream client's publishes
// (the KV buckets'). Submissions are retried with their idempotency key until
// accepted, as the CLI does. Every job ends, the invariant checker finds nothing lost,
// doubled, stuck or illegal, and every history verifies. Short: 60 jobs; long
// (GRIDWIRE_E2E_LONG=1): 500.
func TestFaultyClientUnderThePipeline(t *testing.T) {
	jobs := 60
	if os.Getenv("GRIDWIRE_E2E_LONG") == "1" {
		jobs = 500
	}
	const seed = 18
	in := natsfault.New(natsfault.Rates{PublishError: 0.01, LostAck: 0.01, AckError: 0.01}, seed)
	h := newHarnessFaulty(t, cluster.Default(), in)
	ks, err := openKeyset(h.keysDir(), h.cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ks.signer(events.RoleIngest, "")
	if err != nil {
		t.Fatal(err)
	}
	js := in.Wrap(h.client.JS)
	sub, err := ingest.New(ingest.Config{}, ingest.Deps{Store: events.NewStore(h.client.Conn, js, events.SourcePrefix+"ingest/r10",
		events.WithSigningKey(key), events.WithPublishFaults(in.PublishFault)),
		Check: vetJob, Keys: ingest.KVKeys{JS: js}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var ids []string
	retries := 0
	for i := range jobs {
		for attempt := 0; ; attempt++ {
			acc, err := sub.Submit(ctx, ingest.Submission{File: "r10.json", Data: []byte(`{"version":3,"executable":"/bin/true"}`),
				Submitter: "test", IdempotencyKey: fmt.Sprintf("r10-%d", i)})
			if err == nil {
				ids = append(ids, acc.Jobs...)
				break
			}
			if attempt == 20 {
				t.Fatalf("submission %d refused 20 times: %v", i, err)
			}
			retries++
		}
	}
	stuck := waitAllEnded(t, h, ids, 4*time.Minute)
	expect := filepath.Join(t.TempDir(), "acknowledged")
	if err := os.WriteFile(expect, []byte(strings.Join(ids, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	url := "--nats-url=" + h.natsURL()
	inv, _, invErr := runCLI(ctx, "audit", "invariants", "--expect", expect, url)
	verify, _, verifyErr := runCLI(ctx, "audit", "verify", "--all", url, "--signing-keys="+h.keysDir())
	c := in.Counts()
	t.Logf("R10 (seed %d): faults injected %d (publish errors %d, lost acks %d, ack errors %d), jobs %d, submissions retried %d, stuck %d; invariants: %s",
		seed, c.Total(), c.PublishErrors, c.LostAcks, c.AckErrors, len(ids), retries, stuck, lastLine(inv))
	if c.PublishErrors == 0 || c.LostAcks == 0 || c.AckErrors == 0 {
		t.Errorf("not every kind of fault was injected: %+v", c)
	}
	if stuck > 0 || invErr != nil {
		t.Fatalf("%d jobs did not end; audit invariants: %v\n%s", stuck, invErr, inv)
	}
	if verifyErr != nil || !strings.Contains(verify, ": 0 broken") {
		t.Fatalf("audit verify: %v\n%s", verifyErr, verify)
	}
}

// waitAllEnded waits until every job has a terminal state or the bound passes, and
// returns how many had not ended.
func waitAllEnded(t *testing.T, h *harness, ids []string, bound time.Duration) int {
	t.Helper()
	pending := append([]string(nil), ids...)
	for deadline := time.Now().Add(bound); len(pending) > 0 && time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		left := pending[:0]
		for _, id := range pending {
			if st, err := h.store.State(context.Background(), id); err != nil || !st.Status.Terminal() {
				left = append(left, id)
			}
		}
		pending = left
	}
	return len(pending)
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
