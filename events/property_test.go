package events_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/gridwire/gridwire/events"
)

// ddsTask is a task of session with the given properties, in collection instance coll
// ("" outside one).
func ddsTask(session, path, coll string, props ...events.DDSProperty) *events.Job {
	return &events.Job{ID: events.NewID(), Parent: session, DDS: &events.DDSContext{TaskPath: path, TaskID: "17",
		CollectionPath: coll, Properties: props}}
}

func prop(name, access, scope string) events.DDSProperty {
	return events.DDSProperty{Name: name, Access: access, Scope: scope}
}

func TestPropertyWriteFollowsTheDeclaration(t *testing.T) {
	session := events.NewID()
	writer := ddsTask(session, "main/c_0/w_0", "main/c_0", prop("peer", "write", ""), prop("port", "read", "global"),
		prop("shm", "readwrite", "collection"))
	loose := ddsTask(session, "main/w_1", "", prop("shm", "", "collection"))
	cases := []struct {
		name       string
		task       *events.Job
		key, value string
		want       events.PropertySetData
		refused    string
	}{
		{"write access", writer, "peer", "host:1", events.PropertySetData{Key: "peer", Value: "host:1", Task: writer.ID,
			TaskPath: "main/c_0/w_0", DDSTaskID: "17", Scope: "global"}, ""},
		{"collection scope names the instance", writer, "shm", "k", events.PropertySetData{Key: "shm", Value: "k", Task: writer.ID,
			TaskPath: "main/c_0/w_0", DDSTaskID: "17", Scope: "collection", Collection: "main/c_0"}, ""},
		{"read access", writer, "port", "1", events.PropertySetData{}, "declares it with read access"},
		{"not declared", writer, "other", "1", events.PropertySetData{}, "does not declare it"},
		{"collection scope outside a collection", loose, "shm", "1", events.PropertySetData{}, "is in no collection"},
		{"value too long", writer, "peer", strings.Repeat("é", 257), events.PropertySetData{}, "257 characters; the limit is 256"},
		{"bad name", writer, "a.b", "1", events.PropertySetData{}, "is not allowed in a property name"},
		{"not a session's task", &events.Job{ID: events.NewID()}, "peer", "1", events.PropertySetData{}, "only a task of a DDS session"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := events.PropertyWrite(c.task, c.key, c.value)
			if c.refused != "" {
				if !errors.Is(err, events.ErrPropertyRefused) || !strings.Contains(err.Error(), c.refused) {
					t.Fatalf("PropertyWrite = %v, want a refusal saying %q", err, c.refused)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(c.want, got); d != "" {
				t.Fatalf("PropertyWrite (-want +got):\n%s", d)
			}
		})
	}
	// 256 characters of two bytes each are within the limit: it counts characters.
	if _, err := events.PropertyWrite(writer, "peer", strings.Repeat("é", 256)); err != nil {
		t.Fatalf("256 characters refused: %v", err)
	}
}

// A value reaches the readers DDS's agent sends it to: tasks that read the key, and for
// a collection-scoped property only those of the writer's collection instance.
func TestPropertyReachesReadersInScope(t *testing.T) {
	session := events.NewID()
	global := events.PropertySetData{Key: "peer", Value: "v", Scope: "global"}
	inC0 := events.PropertySetData{Key: "shm", Value: "v", Scope: "collection", Collection: "main/g/c_0"}
	for _, c := range []struct {
		name string
		d    events.PropertySetData
		task *events.Job
		want bool
	}{
		{"reader", global, ddsTask(session, "r", "", prop("peer", "read", "")), true},
		{"readwrite", global, ddsTask(session, "r", "", prop("peer", "readwrite", "")), true},
		{"default access", global, ddsTask(session, "r", "", prop("peer", "", "")), true},
		{"write only", global, ddsTask(session, "r", "", prop("peer", "write", "")), false},
		{"undeclared", global, ddsTask(session, "r", "", prop("other", "read", "")), false},
		{"same collection instance", inC0, ddsTask(session, "r", "main/g/c_0", prop("shm", "read", "collection")), true},
		{"another instance", inC0, ddsTask(session, "r", "main/g/c_1", prop("shm", "read", "collection")), false},
		{"outside collections", inC0, ddsTask(session, "r", "", prop("shm", "read", "collection")), false},
	} {
		if got := c.d.Reaches(c.task); got != c.want {
			t.Errorf("%s: Reaches = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestPropertySetFoldsOnlyIntoASession(t *testing.T) {
	session, task := events.NewID(), events.NewID()
	good := events.PropertySetData{Key: "peer", Value: "v", Task: task, Scope: "global"}
	group := ev(t, session, 1, events.Submitted, "", events.Job{ID: session, Kind: events.KindGroup, Children: []string{task}})
	st, err := events.Replay([]events.Event{group, ev(t, session, 2, events.PropertySet, "", good)})
	if err != nil {
		t.Fatalf("a session refuses a property set: %v", err)
	}
	if st.Status != events.StatusSubmitted || st.Events != 2 {
		t.Fatalf("a property set moved the session: %s after %d events", st.Status, st.Events)
	}
	for name, d := range map[string]events.PropertySetData{
		"too long":              {Key: "peer", Value: strings.Repeat("x", 257), Task: task, Scope: "global"},
		"no scope":              {Key: "peer", Value: "v", Task: task},
		"collection, no name":   {Key: "peer", Value: "v", Task: task, Scope: "collection"},
		"global, a collection":  {Key: "peer", Value: "v", Task: task, Scope: "global", Collection: "c"},
		"writer not a job":      {Key: "peer", Value: "v", Task: "x.y", Scope: "global"},
		"key with a dot in it":  {Key: "a.b", Value: "v", Task: task, Scope: "global"},
		"key empty, value kept": {Value: "v", Task: task, Scope: "global"},
	} {
		if _, err := events.Apply(st, ev(t, session, 3, events.PropertySet, "", d)); !errors.Is(err, events.ErrIllegalTransition) {
			t.Errorf("%s: Apply = %v, want an illegal transition", name, err)
		}
	}
	plain := life(t, task)[:4]
	runStates, err := events.Replay(plain)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := events.Apply(runStates, ev(t, task, 5, events.PropertySet, "", good)); !errors.Is(err, events.ErrIllegalTransition) {
		t.Fatalf("a task's own history took a property set: %v", err)
	}
}

// The invariants check every recorded property set against its writer's declaration.
func TestInvariantsCheckPropertyWriters(t *testing.T) {
	session := events.NewID()
	writer := ddsTask(session, "main/w_0", "", prop("peer", "write", ""), prop("port", "read", ""))
	stranger := ddsTask(events.NewID(), "main/w_0", "", prop("peer", "write", ""))
	hist := map[string][]events.Event{
		session: {ev(t, session, 1, events.Submitted, "", events.Job{ID: session, Kind: events.KindGroup, Children: []string{writer.ID}})},
		writer.ID: {ev(t, writer.ID, 2, events.Submitted, "", writer),
			ev(t, writer.ID, 9, events.Cancelled, "", events.EndData{})},
		stranger.ID: {ev(t, stranger.ID, 3, events.Submitted, "", stranger),
			ev(t, stranger.ID, 10, events.Cancelled, "", events.EndData{})},
	}
	set := func(seq uint64, key, by string) events.Event {
		return ev(t, session, seq, events.PropertySet, "", events.PropertySetData{Key: key, Value: "v", Task: by, Scope: "global"})
	}
	hist[session] = append(hist[session], set(4, "peer", writer.ID))
	if r := events.CheckInvariants(hist, nil); r.Properties != 0 {
		t.Fatalf("a declared write counted as a violation: %v", r.Problems)
	}
	hist[session] = append(hist[session], set(5, "port", writer.ID), set(6, "peer", stranger.ID))
	r := events.CheckInvariants(hist, nil)
	if r.Properties != 2 || r.OK() {
		t.Fatalf("Properties = %d (%v), want 2: a read-only key and another session's task", r.Properties, r.Problems)
	}
}
