package events_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/gridwire/gridwire/events"
)

// deleted is a directory_deleted event of job id at second sec, routed to cluster.
func deleted(t *testing.T, id, cluster string, sec int64) events.Event {
	t.Helper()
	e, err := events.New(id, events.DirectoryDeleted, cluster, time.Unix(sec, 0),
		events.DirectoryDeletedData{OK: true, Paths: []string{"/w/" + id}, Script: "DELETE", Tries: 1})
	if err != nil {
		t.Fatal(err)
	}
	e.Seq = uint64(sec)
	return e
}

// directory_deleted follows the end, once, on the attempt's cluster, and leaves the job
// as its end made it (status and end time).
func TestDirectoryDeletedFollowsTheEndOnce(t *testing.T) {
	id := events.NewID()
	ended := slices.Clip(history(t, id, events.Submitted, events.Incarnated, events.Cancelled))
	st, err := events.Replay(append(ended, deleted(t, id, "local", 10)))
	if err != nil {
		t.Fatal(err)
	}
	if st.Status != events.StatusCancelled || !st.EndedAt.Equal(time.Unix(2, 0)) || st.DirectoryDeleted == nil ||
		st.DirectoryDeleted.Paths[0] != "/w/"+id || st.Events != 4 {
		t.Fatalf("after directory_deleted: status %s, ended %v, fact %+v, events %d", st.Status, st.EndedAt, st.DirectoryDeleted, st.Events)
	}
	refused := map[string][]events.Event{
		"twice":           append(ended, deleted(t, id, "local", 10), deleted(t, id, "local", 11)),
		"before the end":  append(history(t, id, events.Submitted, events.Incarnated), deleted(t, id, "local", 10)),
		"another cluster": append(ended, deleted(t, id, "hpc1", 10)),
	}
	for name, evs := range refused {
		if _, err := events.Replay(evs); !errors.Is(err, events.ErrIllegalTransition) {
			t.Errorf("%s: %v, want an illegal transition", name, err)
		}
	}
}

// A crashed attempt's directory may be deleted before its restart; the next attempt gets
// its own.
func TestDirectoryDeletedOncePerAttempt(t *testing.T) {
	id := events.NewID()
	job, _ := events.New(id, events.Submitted, "", time.Unix(0, 0), events.Job{ID: id, Executable: "/bin/false", Restarts: 1})
	evs := []events.Event{job}
	evs = append(evs, history(t, id, events.Submitted, events.Incarnated, events.Queued, events.Started)[1:]...)
	code := 1
	exited, _ := events.New(id, events.Failed, "", time.Unix(5, 0), events.EndData{ExitCode: &code})
	restarted, _ := events.New(id, events.Restarted, "", time.Unix(7, 0), events.RestartedData{Attempt: 2, Of: 2})
	evs = append(evs, exited, deleted(t, id, "local", 6), restarted)
	evs = append(evs, history(t, id, events.Submitted, events.Incarnated, events.Cancelled)[1:]...)
	evs = append(evs, deleted(t, id, "local", 20))
	st, err := events.Replay(evs)
	if err != nil {
		t.Fatal(err)
	}
	if st.Attempt() != 2 || st.DirectoryDeleted == nil {
		t.Fatalf("attempt %d, fact %+v", st.Attempt(), st.DirectoryDeleted)
	}
	if r := events.CheckInvariants(map[string][]events.Event{id: evs}, nil); !r.OK() {
		t.Fatalf("invariants: %+v", r)
	}
}

// The audit counts a job's one directory_deleted as sound, a second as an event after the
// end and a misrouted one as illegal.
func TestInvariantsKnowDirectoryDeleted(t *testing.T) {
	ok, twice, wrong := events.NewID(), events.NewID(), events.NewID()
	end := func(id string) []events.Event {
		return history(t, id, events.Submitted, events.Incarnated, events.Cancelled)
	}
	log := map[string][]events.Event{
		ok:    append(end(ok), deleted(t, ok, "local", 10)),
		twice: append(end(twice), deleted(t, twice, "local", 10), deleted(t, twice, "local", 11)),
		wrong: append(end(wrong), deleted(t, wrong, "hpc1", 10)),
	}
	r := events.CheckInvariants(log, nil)
	if r.After != 1 || r.Illegal != 1 || r.Terminals != 0 || r.Stuck != 0 {
		t.Fatalf("report %+v\n%v", r, r.Problems)
	}
	if r := events.CheckInvariants(map[string][]events.Event{ok: log[ok]}, nil); !r.OK() {
		t.Fatalf("one directory_deleted: %+v", r)
	}
}

// Only the executor of the job's cluster writes directory_deleted.
func TestOnlyTheClustersExecutorDeletes(t *testing.T) {
	id := events.NewID()
	st, err := events.Replay(history(t, id, events.Submitted, events.Incarnated, events.Cancelled))
	if err != nil {
		t.Fatal(err)
	}
	e := deleted(t, id, "local", 10)
	if err := (events.Grant{Role: events.RoleExecutor, Clusters: []string{"local"}}).May(e, st); err != nil {
		t.Errorf("local's executor: %v", err)
	}
	for _, g := range []events.Grant{{Role: events.RoleExecutor, Clusters: []string{"hpc1"}}, {Role: events.RoleIngest},
		{Role: events.RoleWatcher}, {Role: events.RoleStager}, {Role: events.RoleIncarnator}} {
		if err := g.May(e, st); !errors.Is(err, events.ErrNoRight) {
			t.Errorf("%s %v may write directory_deleted: %v", g.Role, g.Clusters, err)
		}
	}
}
