package readside

import (
	"bytes"
	"fmt"
	"math"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/gridwire/gridwire/events"
)

// foldLives folds n whole lives (eventstest.Life: 11 events, 4 clusters, two submitters)
// into a fresh table, as the live projector folds them, and returns it.
func foldLives(tb testing.TB, n int) *Table {
	tb.Helper()
	t := NewTable()
	seq := uint64(0)
	for i := range n {
		id := events.NewID()
		for k, s := range life(id, fmt.Sprintf("c%d", i%4), i) {
			e, err := events.New(id, s.Name, s.Route, t0.Add(time.Duration(k)*time.Second), s.Payload)
			if err != nil {
				tb.Fatal(err)
			}
			e.Source = "bench/table"
			body, err := e.Encode()
			if err != nil {
				tb.Fatal(err)
			}
			seq++
			stored, err := events.DecodeStored(body, events.Subject(e.JobID, e.Name, e.Route), seq)
			if err != nil {
				tb.Fatal(err)
			}
			if _, err := t.Apply(stored); err != nil {
				tb.Fatal(err)
			}
		}
	}
	return t
}

// BenchmarkTableBytesPerJob is what the job table holds per job (Go heap in use after a
// collection, divided by the jobs): issue 14's million-job RSS row is mostly this, times
// a million, beside the NATS server's subject index.
//
//	cd services/readside && go test -run '^$' -bench TableBytesPerJob -benchtime 1x .
func BenchmarkTableBytesPerJob(b *testing.B) {
	const jobs = 100_000
	for b.Loop() {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		t := foldLives(b, jobs)
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/jobs, "heap-B/job")
		runtime.KeepAlive(t)
	}
}

// A row gives back exactly the Row it was made from, for ordinary values and for every
// value that does not pack (times not in UTC or out of range, unknown states and kinds,
// an event ID that is not a canonical ULID, numbers past 32 bits, lists).
func TestRowRoundTrip(t *testing.T) {
	// A field added to events.State must be packed by row (and added here).
	if n := reflect.TypeFor[events.State]().NumField(); n != 30 {
		t.Fatalf("events.State has %d fields; row packs 30", n)
	}
	at := time.Date(2026, 11, 23, 22, 0, 0, 123456789, time.UTC)
	code, big := 3, math.MaxInt32+1
	plain := Row{JobID: events.NewID(), Status: events.StatusFailed, Cluster: "c1", Queue: "q", NativeID: "42",
		NativeState: "R", Host: "h", HostKey: "ssh-ed25519 AAAA", ExitCode: &code, Reason: "exit",
		StagedOut: &events.StagedOutData{OK: true, Files: 2}, DirectoryDeleted: &events.DirectoryDeletedData{OK: true, Paths: []string{"/w"}},
		StatusUnknown: true, CancelRequested: true, HoldRequested: true, ResumeRequested: true, HeldFrom: events.StatusRunning,
		SubmittedAt: at, StartedAt: at.Add(time.Second), EndedAt: at.Add(2 * time.Second), UpdatedAt: at.Add(3 * time.Second),
		Events: 9, LastSeq: 1 << 40, LastID: events.NewID()}
	plain.Job = &events.Job{ID: plain.JobID, Name: "n", Kind: events.KindGroup, Parent: events.NewID(), Submitter: "alice", Restarts: 2,
		DDS: &events.DDSContext{CollectionPath: "col"}}
	plain.Job.Original.Path = "job[1]"
	odd := plain
	odd.Status, odd.HeldFrom, odd.LastID = "WEIRD", "ALSO", "not-a-ulid"
	odd.SubmittedAt = at.In(time.FixedZone("x", 3600))
	odd.EndedAt = time.Date(1500, 1, 1, 0, 0, 0, 0, time.UTC)
	odd.Events, odd.ExitCode = big, &big
	odd.StagedOut = &events.StagedOutData{OK: false, Failed: []string{"a"}, Cleaned: []string{"b"}}
	odd.Attempts = []events.Attempt{{Attempt: 1, Status: events.StatusFailed}}
	odd.Group = &events.GroupSummary{Children: 2, Counts: map[events.Status]int{events.StatusRunning: 2}}
	odd.Job = &events.Job{ID: "other", Kind: "other-kind", Restarts: big}
	lower := plain
	lower.LastID = strings.ToLower(plain.LastID)
	for name, st := range map[string]Row{"plain": plain, "odd": odd, "lowercase id": lower, "empty": {JobID: "j"}} {
		r := compact(st)
		if d := cmp.Diff(st, r.state()); d != "" {
			t.Errorf("%s: the row gives back another state (-in +out):\n%s", name, d)
		}
		if b1, b2 := encodeRow(st), encodeRow(r.state()); !bytes.Equal(b1, b2) {
			t.Errorf("%s: KV value %s, want %s", name, b2, b1)
		}
		// Folding from the row: the same state, its job in the scratch given.
		var j events.Job
		fs := r.foldState(&j)
		fs.LastID = st.LastID
		if d := cmp.Diff(st, fs); d != "" || (st.Job != nil && fs.Job != &j) {
			t.Errorf("%s: fold state differs (-in +out):\n%s", name, d)
		}
		// A row folded from another reuses its interned strings and gives the same.
		if n := r.next(st); !cmp.Equal(st, n.state()) {
			t.Errorf("%s: next of the same state differs", name)
		}
	}
}
