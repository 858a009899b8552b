package main

import (
	"testing"
	"time"

	"github.com/gridwire/gridwire/events"
)

// Each event's line in --follow, watch and history says what the event says.
func TestEventNotes(t *testing.T) {
	code := 3
	for _, c := range []struct {
		name    events.Name
		payload any
		who     string
		note    string // eventNote
		detail  string // history's DETAIL
	}{
		{events.Transfer, events.TransferData{From: "http://h/a", To: "a", Attempt: 1, Of: 2, Error: "refused"}, "",
			": attempt 1 of 2: http://h/a -> a failed: refused", "attempt 1 of 2: http://h/a -> a failed: refused"},
		{events.Transfer, events.TransferData{From: "x", To: "y", Attempt: 2, Of: 2, Bytes: 5}, "",
			": attempt 2 of 2: x -> y (5 bytes)", "attempt 2 of 2: x -> y (5 bytes)"},
		{events.Incarnated, events.IncarnatedData{Cluster: "hpc", Host: "n1"}, "", ": for cluster hpc on n1", "for cluster hpc on n1"},
		{events.Started, events.StartedData{NativeID: "42"}, "", ": native id 42", "native id 42"},
		{events.StatusChanged, events.StatusData{State: events.StatusRunning, NativeState: "R"}, "", ": RUNNING (R)", "RUNNING (R)"},
		{events.Exited, events.ExitedData{ExitCode: code}, "", ": exit code 3", "exit code 3"},
		{events.Failed, events.EndData{ExitCode: &code, Reason: "exit code 3\nand more"}, "", ": exit code 3 and more", "exit code 3 and more"},
		{events.CancelRequested, map[string]string{"reason": "enough"}, "olga", ": enough", "by olga: enough"},
		{events.HoldRequested, map[string]string{}, "olga", "", "by olga"},
		{events.SessionUpdated, events.SessionUpdateData{Added: []string{"a"}, Removed: []string{"b", "c"}}, "rita",
			": 1 added, 2 removed", "by rita: 1 added, 2 removed"},
		{events.Queued, events.QueuedData{Cluster: "hpc"}, "", "", ""},
		{events.PropertySet, events.PropertySetData{Key: "peer", Value: "10.0.0.1:5000", TaskPath: "main/server_0"}, "",
			`: peer = "10.0.0.1:5000" by main/server_0`, `peer = "10.0.0.1:5000" by main/server_0`},
		{events.DirectoryDeleted, events.DirectoryDeletedData{OK: true, Paths: []string{"/w/J"}, Host: "n1"}, "", ": removed /w/J on n1", "removed /w/J on n1"},
		{events.DirectoryDeleted, events.DirectoryDeletedData{Paths: []string{"/w/J"}, Reason: "DELETE exited 1"}, "",
			": could not remove /w/J: DELETE exited 1", "could not remove /w/J: DELETE exited 1"},
		{events.Restarted, events.RestartedData{Attempt: 2, Of: 3, Reason: "exit code 5"}, "",
			": attempt 2 of 3; the last one ended: exit code 5", "attempt 2 of 3; the last one ended: exit code 5"},
	} {
		ev, err := events.New(events.NewID(), c.name, "", time.Now(), c.payload)
		if err != nil {
			t.Fatal(err)
		}
		ev.Principal = c.who
		if got := eventNote(ev); got != c.note {
			t.Errorf("%s: note %q, want %q", c.name, got, c.note)
		}
		if got := detail(ev); got != c.detail {
			t.Errorf("%s: detail %q, want %q", c.name, got, c.detail)
		}
	}
}
