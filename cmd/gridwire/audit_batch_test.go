package main

import (
	"context"
	"strings"
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
