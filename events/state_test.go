package events_test

import (
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/gridwire/gridwire/events"
)

// ev builds an event as if read back from the stream at sequence seq.
func ev(t *testing.T, id string, seq uint64, name events.Name, route string, payload any) events.Event {
	t.Helper()
	e, err := events.New(id, name, route, t0.Add(time.Duration(seq)*time.Millisecond), payload)
	if err != nil {
		t.Fatal(err)
	}
	e.Seq, e.Source = seq, "test"
	return e
}

// life is a whole successful job's history.
func life(t *testing.T, id string) []events.Event {
	return []events.Event{
		ev(t, id, 1, events.Submitted, "", events.Job{ID: id, Executable: "/bin/true"}),
		ev(t, id, 2, events.Incarnated, "", events.IncarnatedData{Cluster: "local", WorkDir: "/w"}),
		ev(t, id, 3, events.Queued, "local", events.QueuedData{Cluster: "local"}),
		ev(t, id, 4, events.Started, "local", events.StartedData{Cluster: "local", NativeID: "42", Running: true}),
		ev(t, id, 5, events.Exited, "local", events.ExitedData{ExitCode: 0}),
		ev(t, id, 6, events.StagedOut, "local", events.StagedOutData{OK: true}),
		ev(t, id, 7, events.Succeeded, "", events.EndData{}),
	}
}

func TestReplayOfALife(t *testing.T) {
	id := events.NewID()
	evs := life(t, id)
	st, err := events.Replay(evs)
	if err != nil {
		t.Fatal(err)
	}
	code := 0
	want := events.State{JobID: id, Status: events.StatusSucceeded, Job: &events.Job{ID: id, Executable: "/bin/true"},
		Incarnation: &events.IncarnatedData{Cluster: "local", WorkDir: "/w"}, Cluster: "local", NativeID: "42",
		ExitCode: &code, StagedOut: &events.StagedOutData{OK: true},
		SubmittedAt: evs[0].Time, StartedAt: evs[3].Time, EndedAt: evs[6].Time, UpdatedAt: evs[6].Time,
		Events: 7, LastSeq: 7, LastID: evs[6].ID}
	if diff := cmp.Diff(want, st); diff != "" {
		t.Fatalf("replayed state (-want +got):\n%s", diff)
	}
	// Replaying twice gives the same state: the fold is pure.
	again, _ := events.Replay(evs)
	if diff := cmp.Diff(st, again); diff != "" {
		t.Fatalf("second replay differs:\n%s", diff)
	}
}

// Store.decideOnce folds an event before it is stored and then sets only LastSeq and
// LastHash: that is right only while no step reads what storing adds.
func TestApplyTakesOnlySeqAndHashFromTheStoredForm(t *testing.T) {
	var st events.State
	for _, e := range life(t, events.NewID()) {
		e.Hash = "h" + strconv.FormatUint(e.Seq, 10)
		e.Subject = "jobs.x." + string(e.Name) + "._"
		stored := mustApply(t, st, e)
		unstored := e
		unstored.Seq, unstored.Hash, unstored.Subject = 0, "", ""
		early := mustApply(t, st, unstored)
		early.LastSeq, early.LastHash = e.Seq, e.Hash
		if diff := cmp.Diff(stored, early); diff != "" {
			t.Fatalf("%s: folding the unstored event differs beyond LastSeq/LastHash (-stored +early):\n%s", e.Name, diff)
		}
		st = stored
	}
}

func TestIllegalTransitionsAreRefused(t *testing.T) {
	id := events.NewID()
	evs := life(t, id)
	prefix := func(n int) events.State {
		st, err := events.Replay(evs[:n])
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	cases := []struct {
		name  string
		state events.State
		e     events.Event
	}{
		{"anything before submitted", events.State{}, evs[1]},
		{"submitted twice", prefix(1), evs[0]},
		{"queued before incarnated", prefix(1), evs[2]},
		{"started before queued", prefix(2), evs[3]},
		{"started twice", prefix(4), ev(t, id, 9, events.Started, "local", events.StartedData{NativeID: "43", Running: true})},
		{"started without native id", prefix(3), ev(t, id, 9, events.Started, "local", events.StartedData{})},
		{"exited before started", prefix(3), evs[4]},
		{"succeeded before stage-out", prefix(5), evs[6]},
		{"succeeded with exit 1", mustApply(t, prefix(4), ev(t, id, 5, events.Exited, "local", events.ExitedData{ExitCode: 1}),
			ev(t, id, 6, events.StagedOut, "local", events.StagedOutData{OK: true})), evs[6]},
		{"succeeded after failed stage-out", mustApply(t, prefix(5), ev(t, id, 6, events.StagedOut, "local", events.StagedOutData{OK: false})), evs[6]},
		{"anything after the end", prefix(7), ev(t, id, 8, events.Failed, "", events.EndData{})},
		{"queued for another cluster", prefix(2), ev(t, id, 3, events.Queued, "other", events.QueuedData{Cluster: "other"})},
		{"status_changed to a terminal state", prefix(4), ev(t, id, 5, events.StatusChanged, "local", events.StatusData{State: events.StatusSucceeded})},
		{"resumed when not held", prefix(4), ev(t, id, 5, events.Resumed, "local", events.Note{})},
		{"payload job id differs", events.State{}, ev(t, id, 1, events.Submitted, "", events.Job{ID: "OTHER"})},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := events.Apply(c.state, c.e)
			if !errors.Is(err, events.ErrIllegalTransition) {
				t.Fatalf("Apply = %v, want ErrIllegalTransition", err)
			}
			if diff := cmp.Diff(c.state, got); diff != "" {
				t.Fatalf("a refused event changed the state:\n%s", diff)
			}
		})
	}
}

func mustApply(t *testing.T, st events.State, evs ...events.Event) events.State {
	t.Helper()
	for _, e := range evs {
		var err error
		if st, err = events.Apply(st, e); err != nil {
			t.Fatal(err)
		}
	}
	return st
}

func TestHoldAndResumeRestoreTheInterruptedState(t *testing.T) {
	id := events.NewID()
	evs := life(t, id)
	st := mustApply(t, events.State{}, evs[:4]...)
	st = mustApply(t, st, ev(t, id, 5, events.HoldRequested, "local", events.Note{}))
	if !st.HoldRequested {
		t.Fatal("hold request not recorded")
	}
	st = mustApply(t, st, ev(t, id, 6, events.Held, "local", events.Note{}))
	if st.Status != events.StatusHeld || st.HoldRequested {
		t.Fatalf("after held: %s, requested %v", st.Status, st.HoldRequested)
	}
	st = mustApply(t, st, ev(t, id, 7, events.Resumed, "local", events.Note{}))
	if st.Status != events.StatusRunning {
		t.Fatalf("resumed to %s, want RUNNING", st.Status)
	}
}

func TestStatusUnknownNeverEndsAJob(t *testing.T) {
	id := events.NewID()
	st := mustApply(t, events.State{}, life(t, id)[:4]...)
	st = mustApply(t, st, ev(t, id, 5, events.StatusUnknown, "local", events.Note{Reason: "ssh: connection refused"}))
	if st.Status != events.StatusRunning || !st.StatusUnknown {
		t.Fatalf("status_unknown moved the job to %s", st.Status)
	}
	st = mustApply(t, st, ev(t, id, 6, events.StatusKnown, "local", events.Note{}))
	if st.StatusUnknown {
		t.Fatal("status_known did not clear the flag")
	}
}

func TestEncodeDecodeRoundTrip(t *testing.T) {
	id := events.NewID()
	e := ev(t, id, 0, events.Started, "local", events.StartedData{Cluster: "local", NativeID: "7", Running: true})
	e.Principal, e.PrevHash, e.PrevSeq = "alice", "abc123", 41
	body, err := e.Encode()
	if err != nil {
		t.Fatal(err)
	}
	got, err := events.Decode(body)
	if err != nil {
		t.Fatal(err)
	}
	e.Hash, e.Seq = events.HashOf(body), 0
	got.Route = "local" // the route lives in the subject, not the body
	if diff := cmp.Diff(e, got); diff != "" {
		t.Fatalf("round trip (-sent +decoded):\n%s", diff)
	}
}

func TestEncodeRefusesInvalidEvents(t *testing.T) {
	good := ev(t, events.NewID(), 0, events.Submitted, "", events.Job{})
	for name, mutate := range map[string]func(*events.Event){
		"no id":         func(e *events.Event) { e.ID = "" },
		"bad job id":    func(e *events.Event) { e.JobID = "a.b" },
		"wildcard job":  func(e *events.Event) { e.JobID = "*" },
		"unknown name":  func(e *events.Event) { e.Name = "exploded" },
		"bad route":     func(e *events.Event) { e.Route = "a.b" },
		"no source":     func(e *events.Event) { e.Source = "" },
		"no time":       func(e *events.Event) { e.Time = time.Time{} },
		"data not json": func(e *events.Event) { e.Data = []byte("{") },
	} {
		e := good
		mutate(&e)
		if _, err := e.Encode(); !errors.Is(err, events.ErrBadEvent) && !errors.Is(err, events.ErrUnknownEvent) {
			t.Errorf("%s: Encode = %v, want a refusal", name, err)
		}
	}
}

func FuzzDecode(f *testing.F) {
	id := events.NewID()
	for _, name := range events.Names() {
		e, _ := events.New(id, name, "", t0, events.Note{Reason: "seed"})
		e.Source = "fuzz"
		if b, err := e.Encode(); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte(`{"specversion":"1.0"}`))
	f.Add([]byte(`{"specversion":"1.0","id":"x","source":"s","type":"dev.gridwire.job.submitted.v1","subject":"J","prevseq":"-1","data":{}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		e, err := events.Decode(body)
		if err != nil {
			return
		}
		// Whatever decodes must fold without panicking and re-encode if valid.
		_, _ = events.Apply(events.State{}, e)
		if e.Validate() == nil {
			if _, err := e.Encode(); err != nil {
				t.Fatalf("a decoded, valid event does not encode: %v", err)
			}
		}
	})
}

// The watcher may see a job held or released on its target before the executor's own
// held or resumed event lands (or without one, when it happened behind gridwire's back).
// Either way the pending request is met, and HeldFrom says where the job is held from
// only while it is held: a stale resume request left standing released the job again
// after its next hold, and a stale HeldFrom kept a running job looking held.
func TestStatusSeenBeforeTheRequestedActionMeetsTheRequest(t *testing.T) {
	id := events.NewID()
	evs := life(t, id)[:4]
	evs = append(evs,
		ev(t, id, 5, events.HoldRequested, "local", nil),
		ev(t, id, 6, events.StatusChanged, "local", events.StatusData{State: events.StatusHeld, NativeState: "SUSPENDED"}))
	st, err := events.Replay(evs)
	if err != nil {
		t.Fatal(err)
	}
	if st.Status != events.StatusHeld || st.HeldFrom != events.StatusRunning || st.HoldRequested {
		t.Fatalf("held as seen: %s from %q, hold requested %v; want HELD from RUNNING, request met", st.Status, st.HeldFrom, st.HoldRequested)
	}
	evs = append(evs,
		ev(t, id, 7, events.ResumeRequested, "local", nil),
		ev(t, id, 8, events.StatusChanged, "local", events.StatusData{State: events.StatusRunning, NativeState: "RUNNING"}))
	if st, err = events.Replay(evs); err != nil {
		t.Fatal(err)
	}
	if st.Status != events.StatusRunning || st.HeldFrom != "" || st.ResumeRequested {
		t.Fatalf("released as seen: %s from %q, resume requested %v; want RUNNING, not held from anywhere, request met", st.Status, st.HeldFrom, st.ResumeRequested)
	}
}

// events.Statuses lists every canonical state once, in life order, and Known holds of them alone.
func TestStatusesAreTheCanonicalStates(t *testing.T) {
	all := events.Statuses()
	if len(all) != 10 || all[0] != events.StatusSubmitted || all[len(all)-1] != events.StatusCancelled {
		t.Errorf("events.Statuses() = %v", all)
	}
	for _, s := range all {
		if !s.Known() {
			t.Errorf("%s is not Known", s)
		}
	}
	for _, s := range []events.Status{events.StatusNone, "DONE", "running"} {
		if s.Known() {
			t.Errorf("%q is Known", s)
		}
	}
	all[0] = "CHANGED"
	if events.Statuses()[0] != events.StatusSubmitted {
		t.Error("events.Statuses returns the package's own slice")
	}
}
