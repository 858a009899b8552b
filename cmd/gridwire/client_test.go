package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"

	"github.com/gridwire/gridwire/events"
)

// The stream resumes after a dropped connection from the last event it saw: nothing is
// skipped and nothing is shown twice.
func TestStreamResumesAfterADroppedConnection(t *testing.T) {
	id := events.NewID()
	all := []events.Name{events.Submitted, events.Incarnated, events.Queued, events.Started, events.Exited,
		events.StagedOut, events.Succeeded}
	var mu sync.Mutex
	var afters []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		conn := len(afters)
		afters = append(afters, r.URL.Query().Get("after"))
		mu.Unlock()
		from := 0
		if a := r.URL.Query().Get("after"); a != "" {
			fmt.Sscan(a, &from)
		}
		w.Header().Set("Content-Type", "text/event-stream")
		for seq := from + 1; seq <= len(all); seq++ {
			b, _ := json.Marshal(events.Event{ID: fmt.Sprint(seq), Name: all[seq-1], JobID: id, Seq: uint64(seq)})
			fmt.Fprintf(w, "id: %d\ndata: %s\n\n", seq, b)
			if conn == 0 && seq == 3 {
				return // the first connection drops after three events
			}
		}
	}))
	defer srv.Close()
	c := &client{base: srv.URL, http: srv.Client()}
	var got []events.Name
	err := c.stream(context.Background(), url.Values{"job": {id}}, func(e events.Event) bool {
		got = append(got, e.Name)
		return !e.Name.Terminal()
	})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != fmt.Sprint(all) {
		t.Fatalf("saw %v, want each of %v once", got, all)
	}
	if len(afters) != 2 || afters[0] != "" || afters[1] != "3" {
		t.Fatalf("connections asked for after=%q, want [\"\" \"3\"]", afters)
	}
}

func (f *clientFlags) mustClient(t *testing.T) *client {
	t.Helper()
	c, err := f.client(&env{getenv: func(string) string { return "" }, stdout: io.Discard, stderr: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	return c
}
