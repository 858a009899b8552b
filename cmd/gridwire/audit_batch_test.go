package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/gridwire/gridwire/pkg/cluster"
	"github.com/gridwire/gridwire/services/ingest"
)

// A bulk submission is signed in batches; `gridwire audit verify`, trusting the key
// directory the services signed with, verifies every one of its events.
func TestAuditVerifiesABulkSubmission(t *testing.T) {
	h := newHarnessWith(t, cluster.Default(), "readside")
	subs := make([]ingest.Submission, 150)
	for i := range subs {
		subs[i] = ingest.Submission{File: "bulk.json", Data: []byte(`{"version":3,"executable":"/bin/true"}`), Submitter: "alice"}
	}
	var ids []string
	for _, r := range h.submit.SubmitAll(context.Background(), subs) {
		if r.Error != nil {
			t.Fatal(r.Error)
		}
		ids = append(ids, r.Jobs...)
	}
	if h := h.history(ids[100]); len(h) != 1 || !strings.Contains(h[0].Signature, ".") {
		t.Fatalf("a bulk job's history %+v, want one batch-signed event", h)
	}
	out, _, err := runCLI(context.Background(), "audit", "verify", "--all", "--nats-url="+h.natsURL(), "--signing-keys="+h.keysDir())
	if err != nil || !strings.Contains(out, "verified 150 jobs") || !strings.Contains(out, ": 0 broken") || strings.Contains(out, "unsigned") {
		t.Fatalf("audit verify --all of a bulk submission: %v\n%s", err, out)
	}
	// Without the ingest key trusted, its batches are nobody's.
	out, _, err = runCLI(context.Background(), "audit", "verify", ids[7], "--nats-url="+h.natsURL())
	if err == nil || !strings.Contains(out, "not a trusted key") {
		t.Fatalf("audit verify trusting no key: %v\n%s", err, out)
	}
}

// Submissions of one job each, made at once, share signatures where they are signed at
// the same moment (events' group signing); `gridwire audit verify` verifies every event,
// each alone by its path to its batch's root. Rounds of 64 are submitted until some
// event carries a batch signature (one round nearly always does), at most 20.
func TestAuditVerifiesSubmissionsSignedTogether(t *testing.T) {
	h := newHarnessWith(t, cluster.Default(), "readside")
	sub := ingest.Submission{File: "one.json", Data: []byte(`{"version":3,"executable":"/bin/true"}`), Submitter: "alice"}
	var ids []string
	for round := 0; round < 20 && !anyBatchSigned(h, ids); round++ {
		got := make([]ingest.Accepted, 64)
		errs := make([]error, len(got))
		var wg sync.WaitGroup
		for i := range got {
			wg.Go(func() { got[i], errs[i] = h.submit.Submit(context.Background(), sub) })
		}
		wg.Wait()
		for i, a := range got {
			if errs[i] != nil {
				t.Fatal(errs[i])
			}
			ids = append(ids, a.Jobs...)
		}
	}
	if !anyBatchSigned(h, ids) {
		t.Fatalf("%d jobs submitted 64 at a time, none signed together with another", len(ids))
	}
	out, _, err := runCLI(context.Background(), "audit", "verify", "--all", "--nats-url="+h.natsURL(), "--signing-keys="+h.keysDir())
	want := fmt.Sprintf("verified %d jobs", len(ids))
	if err != nil || !strings.Contains(out, want) || !strings.Contains(out, ": 0 broken") || strings.Contains(out, "unsigned") {
		t.Fatalf("audit verify --all of submissions signed together: %v\n%s", err, out)
	}
}

// anyBatchSigned reports whether one of the jobs' submitted events has a batch signature.
func anyBatchSigned(h *harness, ids []string) bool {
	for _, id := range ids {
		if hist := h.history(id); len(hist) > 0 && strings.Contains(hist[0].Signature, ".") {
			return true
		}
	}
	return false
}
