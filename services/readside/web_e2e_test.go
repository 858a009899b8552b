//go:build e2e

package readside

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/pkg/bus"
)

// chromium returns Debian's chromium; the e2e suite installs it first
// (scripts/install-chromium.sh), so its absence is a failure, not a skip.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("chromium is not installed; scripts/install-chromium.sh installs it (.ci/e2e runs it)")
	return ""
}

// dumpDOM loads url in a real headless browser with a fresh profile and returns the
// DOM after its scripts ran (the page's fetches and its event stream included).
func dumpDOM(t *testing.T, browser, url string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
		"--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--disable-dev-shm-usage", "--user-data-dir="+t.TempDir(), "--virtual-time-budget=4000", "--dump-dom", url)
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("chromium: %v", err)
	}
	return string(out)
}

// streamFor bounds each event stream to a while, as a proxy might: the browser's
// virtual clock only runs once no request is open, and the page reconnects after.
func streamFor(d time.Duration, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/events" && r.Method == http.MethodGet {
			ctx, cancel := context.WithTimeout(r.Context(), d)
			defer cancel()
			r = r.WithContext(ctx)
		}
		next.ServeHTTP(w, r)
	})
}

// rowOf returns the table row of a job in a dumped DOM.
func rowOf(dom, id string) string {
	m := regexp.MustCompile(`<tr data-job="` + id + `"[^>]*>.*?</tr>`).FindString(dom)
	return m
}

// The page at / shows the job table, and a job's state moves live: the table is drawn
// from a projection that is behind the log, and the event stream brings the rest.
func TestWebPageInBrowser(t *testing.T) {
	browser := chromium(t)
	b, st := openBus(t)
	done, running := events.NewID(), events.NewID()
	play(t, st, done, t0, life(done, "c1", 0))
	steps := life(running, "c2", 1)
	play(t, st, running, t0.Add(time.Minute), steps[:7])
	// The projection sees the job RUNNING, then stops following the log.
	const bucket = "frozen"
	stop := start(b, st, Config{Bucket: bucket, FlushEvery: 10 * time.Millisecond}, HTTP{})
	eventually(t, "the projection to fold every event", func() bool {
		kv, err := b.JS.KeyValue(context.Background(), bucket)
		if err != nil {
			return false
		}
		e, err := kv.Get(context.Background(), MetaKey)
		var m Meta
		return err == nil && json.Unmarshal(e.Value(), &m) == nil && m.Seq == uint64(len(steps[:7])+11)
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	play(t, st, running, t0.Add(2*time.Minute), steps[7:]) // ends while the table is behind
	// The page is served from that projection, mirrored as it is.
	srv := serve(t, b, st, Config{Bucket: bucket, NoProjector: true}, func(h http.Handler) http.Handler {
		return streamFor(1500*time.Millisecond, h)
	}).URL
	eventually(t, "the table to show both jobs", func() bool {
		var p Page
		getJSON(t, srv+"/v1/jobs", &p)
		return len(p.Jobs) == 2
	})

	dom := dumpDOM(t, browser, srv+"/")
	for id, want := range map[string]string{done: "SUCCEEDED", running: "FAILED"} {
		row := rowOf(dom, id)
		if !strings.Contains(row, `class="state `+want+`"`) {
			t.Errorf("job %s: row %q, want state %s", id, row, want)
		}
	}
	if !strings.Contains(rowOf(dom, running), ">1<") {
		t.Errorf("the live row lacks the exit code: %s", rowOf(dom, running))
	}

	dom = dumpDOM(t, browser, srv+"/?job="+running)
	for _, want := range []string{
		`class="badge FAILED">FAILED<`,
		`data-script="START"`, "exec ./job.sh",
		"attempt 1 of 2: a → b failed: refused", "attempt 2 of 2: a → b (5 bytes)",
		`class="event status_changed"`, "RUNNING (R)", "exit code 1",
		`class="event failed"`,
	} {
		if !strings.Contains(dom, want) {
			t.Errorf("job page lacks %q", want)
		}
	}
	if n := strings.Count(dom, `<li class="event `); n != len(steps) {
		t.Errorf("timeline has %d events, want %d", n, len(steps))
	}
	if t.Failed() {
		t.Logf("DOM:\n%s", dom)
	}
}

// A group's page lists its jobs in the description's order, by collection, and apart the
// jobs a topology update removed from the session (they still name it as their parent).
func TestWebPageShowsAGroupsJobs(t *testing.T) {
	browser := chromium(t)
	b, st := openBus(t)
	session := events.NewID()
	r := events.NewIDRange(4) // one range, as ingest draws a group's children
	ids := []string{r.At(0), r.At(1), r.At(2), r.At(3)}
	names := []string{"main/solo", "main/pair/w_1", "main/pair/w_0", "main/pair/w_2"}
	play(t, st, session, t0, []step{{Name: events.Submitted, Payload: events.Job{ID: session, Name: "topo", Kind: events.KindGroup,
		Children: ids}}})
	for i, id := range ids {
		steps := life(id, "c1", 0)
		steps[0].Payload = events.Job{ID: id, Name: names[i], Parent: session, Executable: "/bin/true"}
		play(t, st, id, t0, steps[:1])
	}
	play(t, st, session, t0.Add(time.Minute), []step{{Name: events.SessionUpdated,
		Payload: events.SessionUpdateData{Removed: ids[3:]}}})
	order, dom := groupPage(t, browser, b, st, session, len(ids))
	want := []string{"▾ main (1)", "main/solo", "▾ main/pair (2)", "main/pair/w_1", "main/pair/w_0", "▾ removed by a topology update (1)", "main/pair/w_2"}
	if !slices.Equal(order, want) {
		t.Errorf("the group's jobs, in order: %q\nwant %q", order, want)
	}
	if !strings.Contains(dom, "topology updated: 0 tasks added, 1 task removed") {
		t.Error("the timeline does not say what the update did")
	}
	if !strings.Contains(dom, `<section id="output-section" hidden="">`) {
		t.Error("a group's page shows an output section")
	}
	if t.Failed() {
		t.Logf("DOM:\n%s", dom)
	}
}

// A JRDL document's pieces have no names, only their places: the page groups subjobs
// under their job by that place.
func TestWebPageGroupsSubjobsByTheirPlace(t *testing.T) {
	browser := chromium(t)
	b, st := openBus(t)
	doc := events.NewID()
	r := events.NewIDRange(3)
	ids := []string{r.At(0), r.At(1), r.At(2)}
	places := []string{"job[0]", "job[1]/subjob[0]", "job[1]/subjob[1]"}
	play(t, st, doc, t0, []step{{Name: events.Submitted, Payload: events.Job{ID: doc, Name: "two.xml", Kind: events.KindGroup, Children: ids}}})
	for i, id := range ids {
		play(t, st, id, t0, []step{{Name: events.Submitted, Payload: events.Job{ID: id, Parent: doc, Executable: "/bin/true",
			Original: events.Original{Format: "jrdl", Path: places[i]}}}})
	}
	order, dom := groupPage(t, browser, b, st, doc, len(ids))
	if want := []string{"job[0]", "▾ job[1] (2)", "job[1]/subjob[0]", "job[1]/subjob[1]"}; !slices.Equal(order, want) {
		t.Errorf("the document's jobs: %q\nwant %q", order, want)
	}
	if !strings.Contains(dom, `<span id="job-name">two.xml</span>`) {
		t.Error("the document's page is not titled by its name")
	}
	if t.Failed() {
		t.Logf("DOM:\n%s", dom)
	}
}

// groupPage serves the log, waits for the table to list the group's n jobs, and loads
// its page in the browser: the rows of its jobs section in order (a job's name, or a
// branch row's text) and the whole DOM.
func groupPage(t *testing.T, browser string, b *bus.Bus, st *events.Store, group string, n int) ([]string, string) {
	t.Helper()
	srv := serve(t, b, st, Config{}, func(h http.Handler) http.Handler {
		return streamFor(1500*time.Millisecond, h)
	}).URL
	eventually(t, "the table to show the group's jobs", func() bool {
		var p Page
		getJSON(t, srv+"/v1/jobs?parent="+group, &p)
		return len(p.Jobs) == n
	})
	dom := dumpDOM(t, browser, srv+"/?job="+group)
	section := regexp.MustCompile(`(?s)<section id="children-section">.*?</section>`).FindString(dom)
	var rows []string
	for _, m := range regexp.MustCompile(`<td class="name">([^<]*)<|<tr class="branch[^"]*"[^>]*><td[^>]*>([^<]*)<`).FindAllStringSubmatch(section, -1) {
		rows = append(rows, m[1]+m[2])
	}
	return rows, dom
}
