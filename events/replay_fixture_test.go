package events_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/events/eventstest"
)

// minFixtures is how many recorded histories the fixture set must hold at least.
const minFixtures = 30

func loadFixtures(t *testing.T) []eventstest.Fixture {
	t.Helper()
	fs, err := eventstest.LoadFixtures(eventstest.ReplayDir)
	if err != nil {
		t.Fatal(err)
	}
	if len(fs) < minFixtures {
		t.Fatalf("%d replay fixtures in %s, want at least %d", len(fs), eventstest.ReplayDir, minFixtures)
	}
	return fs
}

type foldFunc = func(events.State, events.Event) (events.State, error)

// foldAll folds every job of a fixture with the given fold function, and describes the
// state after each event (eventstest.Trail).
func foldAll(f eventstest.Fixture, apply foldFunc) (map[string]events.State, map[string][]string, error) {
	states, trails := map[string]events.State{}, map[string][]string{}
	for _, id := range f.Jobs() {
		var st events.State
		for _, e := range f.History(id) {
			var err error
			if st, err = apply(st, e); err != nil {
				return states, trails, fmt.Errorf("job %s, event %d (%s): %w", id, e.Seq, e.Name, err)
			}
		}
		trail, err := eventstest.Trail(f.History(id), apply)
		if err != nil {
			return states, trails, err
		}
		states[id], trails[id] = st, trail
	}
	return states, trails, nil
}

// Every recorded history folds, event by event, to exactly the state the live system
// folded it to when it was recorded, through the same states on the way.
func TestReplayFixturesFoldToTheirRecordedState(t *testing.T) {
	for _, f := range loadFixtures(t) {
		t.Run(f.Name, func(t *testing.T) {
			got, trails, err := foldAll(f, events.Apply)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(f.States, got); diff != "" {
				t.Fatalf("replayed states differ from the recorded ones (-recorded +replayed):\n%s", diff)
			}
			if diff := cmp.Diff(f.Trails, trails); diff != "" {
				t.Fatalf("the states on the way differ from the recorded ones (-recorded +replayed):\n%s", diff)
			}
			for _, id := range f.Jobs() {
				if st, err := events.Replay(f.History(id)); err != nil || !cmp.Equal(st, got[id]) {
					t.Errorf("job %s: Replay differs from folding one event at a time (%v)", id, err)
				}
			}
		})
	}
}

// The recorded bodies are the stored bytes: each event names its predecessor's hash and
// sequence, so an edited fixture is found out rather than replayed.
func TestReplayFixturesAreUnbrokenChains(t *testing.T) {
	for _, f := range loadFixtures(t) {
		for _, id := range f.Jobs() {
			h := f.History(id)
			for i, e := range h {
				prevHash, prevSeq := "", uint64(0)
				if i > 0 {
					prevHash, prevSeq = h[i-1].Hash, h[i-1].Seq
				}
				if e.PrevHash != prevHash || e.PrevSeq != prevSeq {
					t.Errorf("%s: job %s event %d (%s) does not chain to its predecessor", f.Name, id, e.Seq, e.Name)
				}
			}
		}
	}
}

// The fixture set covers every event gridwire defines and every way a job ends.
func TestReplayFixturesCoverEveryEventAndEnd(t *testing.T) {
	seen := map[events.Name]bool{}
	ends := map[events.Status]bool{}
	for _, f := range loadFixtures(t) {
		for _, e := range f.Events {
			seen[e.Name] = true
		}
		for _, st := range f.States {
			ends[st.Status] = true
		}
	}
	for _, n := range events.Names() {
		if !seen[n] {
			t.Errorf("no fixture holds a %s event", n)
		}
	}
	for _, s := range []events.Status{events.StatusSucceeded, events.StatusFailed, events.StatusCancelled} {
		if !ends[s] {
			t.Errorf("no fixture ends %s", s)
		}
	}
}

// mutant is a deliberately wrong fold: Apply with one thing changed after one event.
type mutant struct {
	name   string
	event  events.Name
	change func(*events.State)
}

var mutants = []mutant{
	{"exit code off by one", events.Exited, func(s *events.State) { *s.ExitCode++ }},
	{"a signal's exit code folded as the signal", events.Exited, func(s *events.State) {
		if *s.ExitCode > 128 {
			*s.ExitCode -= 128
		}
	}},
	{"an exit forgets the native state", events.Exited, func(s *events.State) { s.NativeState = "" }},
	{"a hold forgets where it came from", events.Held, func(s *events.State) { s.HeldFrom = "" }},
	{"a resume goes to QUEUED", events.Resumed, func(s *events.State) { s.Status = events.StatusQueued }},
	{"status_known leaves the flag up", events.StatusKnown, func(s *events.State) { s.StatusUnknown = true }},
	{"a cancel request is forgotten", events.CancelRequested, func(s *events.State) { s.CancelRequested = false }},
	{"a transfer is not kept", events.Transfer, func(s *events.State) { s.Transfers = s.Transfers[:len(s.Transfers)-1] }},
	{"a failed stage-out looks fine", events.StagedOut, func(s *events.State) { s.StagedOut.OK = true }},
	{"a start loses its host", events.Started, func(s *events.State) { s.Host = "" }},
	{"an end keeps no time", events.Failed, func(s *events.State) { s.EndedAt = s.StartedAt }},
	{"a cancel keeps no reason", events.Cancelled, func(s *events.State) { s.Reason = "" }},
	{"an incarnation forgets its cluster", events.Incarnated, func(s *events.State) { s.Cluster = "" }},
	{"a failed action clears nothing", events.ActionFailed, func(s *events.State) { s.HoldRequested = true }},
}

func (m mutant) apply(s events.State, e events.Event) (events.State, error) {
	next, err := events.Apply(s, e)
	if err == nil && e.Name == m.event {
		m.change(&next)
	}
	return next, err
}

// A deliberately changed fold fails the fixtures: each mutant above makes at least one
// recorded history fold to something other than what it was recorded with.
func TestReplayFixturesCatchAChangedFold(t *testing.T) {
	fs := loadFixtures(t)
	for _, m := range mutants {
		caught := ""
		for _, f := range fs {
			got, trails, err := foldAll(f, m.apply)
			var te *events.TransitionError
			if err != nil && !errors.As(err, &te) {
				t.Fatalf("%s: %s: %v", m.name, f.Name, err)
			}
			if err != nil || !cmp.Equal(f.States, got) || !cmp.Equal(f.Trails, trails) {
				caught = f.Name
				break
			}
		}
		if caught == "" {
			t.Errorf("mutant %q folds every fixture to its recorded state: the fixtures do not pin it", m.name)
		}
	}
}
