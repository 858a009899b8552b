package stager

import (
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/gridwire/gridwire/events"
)

// A stager stopped in the middle of a transfer leaves the log as it was after the last
// finished attempt; the next stager makes the interrupted attempt under the same number
// and does not repeat a file that already came.
func TestRestartMidTransferKeepsAttemptRecordsExact(t *testing.T) {
	e := newEnv(t)
	const bodyB = "the second file, whole"
	var hitsA, hitsB atomic.Int64
	blocked, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/a" {
			hitsA.Add(1)
			io.WriteString(w, "AAAA")
			return
		}
		switch hitsB.Add(1) {
		case 1:
			http.Error(w, "not yet", http.StatusServiceUnavailable)
		case 2: // half the body, then hang until the test lets go
			w.Header().Set("Content-Length", "1000")
			io.WriteString(w, strings.Repeat("b", 10))
			w.(http.Flusher).Flush()
			once.Do(func() { close(blocked) })
			select {
			case <-release:
			case <-r.Context().Done():
			}
		default:
			io.WriteString(w, bodyB)
		}
	}))
	defer srv.Close()
	defer once.Do(func() { close(blocked) })

	stop := e.start(testConfig())
	id := e.incarnate(events.Job{MaxTransferAttempts: 4, StageIn: []events.FileCopy{
		{From: srv.URL + "/a", To: "a"}, {From: srv.URL + "/b", To: "b"}}}, "local", "")
	<-blocked
	e.waitFor(id, "a's success", func(st events.State) bool { return len(st.Transfers) == 2 })
	stop()
	close(release)

	st, err := e.store.State(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	before := []attemptView{
		{To: "a", Attempt: 1, Of: 4, Bytes: 4, SHA256: sum("AAAA")},
		{To: "b", Attempt: 1, Of: 4, Failed: true, Backoff: testConfig().BackoffBase},
	}
	if diff := cmp.Diff(before, sortedView(st.Transfers)); diff != "" || st.Status != events.StatusStagingIn {
		t.Fatalf("after the stop, status %s, records (-want +got):\n%s", st.Status, diff)
	}

	e.start(testConfig())
	st = e.waitStatus(id, events.StatusQueued)
	after := append(before, attemptView{To: "b", Attempt: 2, Of: 4, Bytes: int64(len(bodyB)), SHA256: sum(bodyB)})
	if diff := cmp.Diff(after, sortedView(st.Transfers)); diff != "" {
		t.Errorf("after the restart, records (-want +got):\n%s", diff)
	}
	if hitsA.Load() != 1 || hitsB.Load() != 3 {
		t.Errorf("requests: a %d (want 1), b %d (want 3)", hitsA.Load(), hitsB.Load())
	}
	if got := readFile(t, filepath.Join(st.Incarnation.WorkDir, "b")); got != bodyB {
		t.Errorf("b holds %q", got)
	}
}

// sortedView orders records by file then attempt: files run concurrently, so only
// each file's own order is fixed.
func sortedView(ts []events.TransferData) []attemptView {
	v := view(ts)
	slices.SortStableFunc(v, func(a, b attemptView) int { return strings.Compare(a.To, b.To) })
	return v
}
