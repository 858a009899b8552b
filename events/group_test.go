package events_test

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/gridwire/gridwire/events"
)

func child(id string, st events.Status, started bool, reason string) events.State {
	s := events.State{JobID: id, Status: st, Reason: reason}
	if started {
		s.NativeID = "n-" + id
	}
	return s
}

func TestGroupOfFollowsItsChildren(t *testing.T) {
	sub, run, held, ok, bad, gone := events.StatusSubmitted, events.StatusRunning, events.StatusHeld,
		events.StatusSucceeded, events.StatusFailed, events.StatusCancelled
	cases := []struct {
		name     string
		children []events.State
		want     events.Status
		reason   string
	}{
		{"nothing started", []events.State{child("a", sub, false, ""), child("b", events.StatusQueued, false, "")}, sub, ""},
		{"one runs", []events.State{child("a", run, true, ""), child("b", events.StatusQueued, false, "")}, run, ""},
		{"one ended, one waits", []events.State{child("a", ok, true, ""), child("b", events.StatusStagingIn, false, "")}, run, ""},
		{"all still going are held", []events.State{child("a", held, true, ""), child("b", ok, true, "")}, held, ""},
		{"one held, one runs", []events.State{child("a", held, true, ""), child("b", run, true, "")}, run, ""},
		{"all succeeded", []events.State{child("a", ok, true, ""), child("b", ok, true, "")}, ok, ""},
		{"one failed", []events.State{child("a", ok, true, ""), child("b", bad, true, "exit code 1"), child("c", gone, true, "")}, bad,
			"1 of 3 children failed; first: b: exit code 1"},
		{"cancelled, none failed", []events.State{child("a", ok, true, ""), child("b", gone, false, "cancelled on request")}, gone,
			"1 of 2 children cancelled; first: b: cancelled on request"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := events.GroupOf(c.children)
			if v.Status != c.want || v.Reason != c.reason {
				t.Fatalf("GroupOf = %s %q, want %s %q", v.Status, v.Reason, c.want, c.reason)
			}
			if v.Summary.Children != len(c.children) {
				t.Fatalf("summary counts %d children, want %d", v.Summary.Children, len(c.children))
			}
		})
	}
}

// groupLife is a parent of two children: it runs, then ends as the verdict says.
func TestGroupFoldRunsAndEndsWithCounts(t *testing.T) {
	id := events.NewID()
	sub := ev(t, id, 1, events.Submitted, "", events.Job{ID: id, Kind: events.KindGroup, Children: []string{"a", "b"}})
	parent, err := events.Replay([]events.Event{sub})
	if err != nil {
		t.Fatal(err)
	}
	// A parent never runs itself: the events of a job's own life are refused.
	for _, e := range []events.Event{
		ev(t, id, 2, events.Incarnated, "", events.IncarnatedData{Cluster: "local"}),
		ev(t, id, 2, events.Started, "local", events.StartedData{NativeID: "1", Running: true}),
		ev(t, id, 2, events.Exited, "local", events.ExitedData{}),
	} {
		if _, err := events.Apply(parent, e); !errors.Is(err, events.ErrIllegalTransition) {
			t.Fatalf("%s on a parent record: %v, want an illegal transition", e.Name, err)
		}
	}
	running := events.GroupOf([]events.State{child("a", events.StatusRunning, true, ""), child("b", events.StatusQueued, false, "")})
	name, payload := events.GroupEvent(parent, running)
	if name != events.StatusChanged {
		t.Fatalf("RUNNING verdict on a SUBMITTED parent gives %q, want status_changed", name)
	}
	parent, err = events.Apply(parent, ev(t, id, 2, name, "", payload))
	if err != nil || parent.Status != events.StatusRunning {
		t.Fatalf("parent %s (%v), want RUNNING", parent.Status, err)
	}
	if again, _ := events.GroupEvent(parent, running); again != "" {
		t.Fatalf("the same verdict again gives %q: a redelivery would append twice", again)
	}
	done := events.GroupOf([]events.State{child("a", events.StatusSucceeded, true, ""), child("b", events.StatusFailed, true, "exit code 2")})
	name, payload = events.GroupEvent(parent, done)
	parent, err = events.Apply(parent, ev(t, id, 3, name, "", payload))
	if err != nil {
		t.Fatal(err)
	}
	want := &events.GroupSummary{Children: 2, Counts: map[events.Status]int{events.StatusSucceeded: 1, events.StatusFailed: 1}}
	if parent.Status != events.StatusFailed || parent.Reason != "1 of 2 children failed; first: b: exit code 2" {
		t.Fatalf("parent %s %q, want FAILED naming the child", parent.Status, parent.Reason)
	}
	if diff := cmp.Diff(want, parent.Group); diff != "" {
		t.Fatalf("summary (-want +got):\n%s", diff)
	}
	if parent.Group.String() != "2 children: 1 FAILED, 1 SUCCEEDED" {
		t.Fatalf("summary text %q", parent.Group.String())
	}
}

func TestGroupCannotSucceedWithAFailedChild(t *testing.T) {
	id := events.NewID()
	parent, err := events.Replay([]events.Event{ev(t, id, 1, events.Submitted, "", events.Job{ID: id, Kind: events.KindGroup})})
	if err != nil {
		t.Fatal(err)
	}
	lie := events.EndData{Group: &events.GroupSummary{Children: 2, Counts: map[events.Status]int{events.StatusSucceeded: 1, events.StatusFailed: 1}}}
	if _, err := events.Apply(parent, ev(t, id, 2, events.Succeeded, "", lie)); !errors.Is(err, events.ErrIllegalTransition) {
		t.Fatalf("succeeded with a failed child: %v, want refused", err)
	}
	if _, err := events.Apply(parent, ev(t, id, 2, events.Failed, "", events.EndData{})); !errors.Is(err, events.ErrIllegalTransition) {
		t.Fatalf("an end without a summary: %v, want refused", err)
	}
	if _, err := events.Apply(parent, ev(t, id, 2, events.StatusChanged, "", events.StatusData{State: events.StatusQueued,
		Group: &events.GroupSummary{Children: 1}})); !errors.Is(err, events.ErrIllegalTransition) {
		t.Fatalf("a parent QUEUED: %v, want refused", err)
	}
	held, err := events.Apply(parent, ev(t, id, 2, events.HoldRequested, "", events.Note{}))
	if err != nil || !held.HoldRequested {
		t.Fatalf("hold request on a group: %v", err)
	}
	held, err = events.Apply(held, ev(t, id, 3, events.StatusChanged, "", events.StatusData{State: events.StatusHeld, Group: &events.GroupSummary{Children: 1}}))
	if err != nil || held.Status != events.StatusHeld || held.HoldRequested {
		t.Fatalf("group held: %s hold requested %v (%v)", held.Status, held.HoldRequested, err)
	}
}

func TestSiblingsAreTheSameJobsSubjobs(t *testing.T) {
	mk := func(id string, group, size int) events.State {
		return events.State{JobID: id, Job: &events.Job{ID: id, Parent: "p", Coallocation: &events.Coallocation{Group: group, Size: size}}}
	}
	children := []events.State{mk("a", 0, 2), mk("b", 0, 2), mk("c", 1, 1), {JobID: "d", Job: &events.Job{ID: "d", Parent: "p"}}}
	if got := events.Siblings(children[0].Job, children); !cmp.Equal(got, []string{"b"}) {
		t.Fatalf("siblings of a: %v, want [b]", got)
	}
	if got := events.Siblings(children[2].Job, children); got != nil {
		t.Fatalf("a job of one subjob has siblings %v", got)
	}
}

// A parent with no children (a DDS main that starts no task) has nothing to wait for:
// the verdict is SUCCEEDED at once, and the fold takes it with its empty summary.
func TestGroupOfNoChildrenSucceeds(t *testing.T) {
	id := events.NewID()
	parent, err := events.Replay([]events.Event{ev(t, id, 1, events.Submitted, "", events.Job{ID: id, Kind: events.KindGroup})})
	if err != nil {
		t.Fatal(err)
	}
	v := events.GroupOf(nil)
	if v.Status != events.StatusSucceeded || v.Summary.Children != 0 {
		t.Fatalf("verdict on no children %+v, want SUCCEEDED of 0", v)
	}
	name, payload := events.GroupEvent(parent, v)
	if name != events.Succeeded {
		t.Fatalf("event %q, want succeeded", name)
	}
	if parent, err = events.Apply(parent, ev(t, id, 2, name, "", payload)); err != nil || parent.Status != events.StatusSucceeded {
		t.Fatalf("parent %s (%v), want SUCCEEDED", parent.Status, err)
	}
}

// The summary reads as English for one child and for none.
func TestGroupSummaryStringCountsInWords(t *testing.T) {
	for _, c := range []struct {
		g    events.GroupSummary
		want string
	}{
		{events.GroupSummary{Children: 3, Counts: map[events.Status]int{events.StatusSucceeded: 2, events.StatusFailed: 1}}, "3 children: 1 FAILED, 2 SUCCEEDED"},
		{events.GroupSummary{Children: 1, Counts: map[events.Status]int{events.StatusRunning: 1, events.StatusQueued: 0}}, "1 child: 1 RUNNING"},
		{events.GroupSummary{}, "no children"},
	} {
		if got := c.g.String(); got != c.want {
			t.Errorf("%+v: %q, want %q", c.g, got, c.want)
		}
	}
}
