package readside

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/gridwire/gridwire/events"
)

func request(t *testing.T, method, url string, header map[string]string) (int, http.Header, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url, nil)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		b.WriteString(sc.Text() + "\n")
	}
	return resp.StatusCode, resp.Header, b.String()
}

// Every answer of the API is JSON: an unknown route, a method a route does not take, a
// misspelt filter, a cursor from elsewhere, a stream of a job the log does not hold.
func TestErrorsAreJSONAndInputIsChecked(t *testing.T) {
	_, st, s := apiServer(t, nil)
	id := events.NewID()
	play(t, st, id, t0, life(id, "c1", 0))
	cases := []struct {
		method, path string
		header       map[string]string
		status       int
		code         string
	}{
		{"GET", "/v1/nope", nil, 404, "no_route"},
		{"DELETE", "/v1/jobs/" + id, nil, 405, "method_not_allowed"},
		{"GET", "/v1/jobs?stat=FAILED", nil, 400, "unknown_parameter"},
		{"GET", "/v1/jobs?root=maybe", nil, 400, "bad_root"},
		{"GET", "/v1/jobs/" + id + "?asof=2026-01-01T00:00:00Z", nil, 400, "unknown_parameter"},
		{"GET", "/v1/jobs/" + id + "/events?x=1", nil, 400, "unknown_parameter"},
		{"GET", "/v1/events?jobb=" + id, nil, 400, "unknown_parameter"},
		{"GET", "/v1/events?after=999999", nil, 400, "bad_last_event_id"},
		{"GET", "/v1/events", map[string]string{"Last-Event-ID": "999999"}, 400, "bad_last_event_id"},
		{"GET", "/v1/events?job=" + events.NewID(), nil, 404, "no_such_job"},
		{"GET", "/v1/events?format=xml", nil, 400, "bad_format"},
		{"GET", "/v1/jobs/" + id + "/events/99999", nil, 404, "no_such_event"},
	}
	for _, c := range cases {
		status, h, body := request(t, c.method, s.URL+c.path, c.header)
		var e struct {
			Error struct{ Code string } `json:"error"`
		}
		if status != c.status || json.Unmarshal([]byte(body), &e) != nil || e.Error.Code != c.code ||
			!strings.HasPrefix(h.Get("Content-Type"), "application/json") {
			t.Errorf("%s %s: %d %q %s, want %d and JSON %s", c.method, c.path, status, h.Get("Content-Type"), body, c.status, c.code)
		}
		if status == 405 && !strings.Contains(h.Get("Allow"), "GET") {
			t.Errorf("%s %s: Allow %q", c.method, c.path, h.Get("Allow"))
		}
	}
}

// Events are served as CloudEvents on request: a job's history as a batch, one event
// alone, and the live stream.
func TestCloudEventsOnRequest(t *testing.T) {
	_, st, s := apiServer(t, nil)
	id := events.NewID()
	play(t, st, id, t0, life(id, "c1", 0))
	status, h, body := request(t, "GET", s.URL+"/v1/jobs/"+id+"/events", map[string]string{"Accept": "application/cloudevents-batch+json"})
	var batch []map[string]any
	if status != 200 || h.Get("Content-Type") != "application/cloudevents-batch+json" || json.Unmarshal([]byte(body), &batch) != nil ||
		len(batch) != len(life(id, "c1", 0)) || batch[0]["specversion"] != "1.0" || batch[0]["type"] != "dev.gridwire.job.submitted.v1" ||
		batch[0]["subject"] != id || batch[0]["sequence"] != "1" {
		t.Fatalf("batch: %d %q %.300s", status, h.Get("Content-Type"), body)
	}
	status, h, body = request(t, "GET", s.URL+"/v1/jobs/"+id+"/events/2", map[string]string{"Accept": "application/cloudevents+json"})
	var one map[string]any
	if status != 200 || h.Get("Content-Type") != "application/cloudevents+json" || json.Unmarshal([]byte(body), &one) != nil ||
		one["type"] != "dev.gridwire.job.incarnated.v1" || one["datacontenttype"] != "application/json" {
		t.Errorf("one event: %d %q %.300s", status, h.Get("Content-Type"), body)
	}
	if status, _, body := request(t, "GET", s.URL+"/v1/jobs/"+id+"/events/2", nil); status != 200 || !strings.Contains(body, `"name": "incarnated"`) {
		t.Errorf("one event in gridwire's JSON: %d %.200s", status, body)
	}
	resp, err := http.Get(s.URL + "/v1/events?format=cloudevents&job=" + id)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			var ev map[string]any
			if json.Unmarshal([]byte(data), &ev) != nil || ev["specversion"] != "1.0" || ev["subject"] != id {
				t.Errorf("SSE as CloudEvents: %s", data)
			}
			break
		}
	}
}

// The list searches, nests groups, counts by state and names its clusters; whoami says
// what the caller may do.
func TestListSearchGroupsAndCounts(t *testing.T) {
	b, st, s := apiServer(t, nil)
	group, child1, child2, lone := events.NewID(), events.NewID(), events.NewID(), events.NewID()
	play(t, st, group, t0, []step{{Name: events.Submitted, Route: "", Payload: events.Job{ID: group, Name: "topology", Kind: events.KindGroup,
		Children: []string{child1, child2}}}})
	for i, c := range []string{child1, child2} {
		steps := life(c, "c1", i)
		steps[0].Payload = events.Job{ID: c, Name: "main/task_" + string(rune('0'+i)), Parent: group, Executable: "/bin/true"}
		play(t, st, c, t0, steps)
	}
	play(t, st, lone, t0, life(lone, "c2", 1))
	var page Page
	list := func(query string) {
		page = Page{}
		getJSON(t, s.URL+"/v1/jobs"+query, &page)
	}
	stream, err := b.JS.Stream(context.Background(), events.Stream)
	if err != nil {
		t.Fatal(err)
	}
	last := stream.CachedInfo().State.LastSeq
	eventually(t, "the table to hold four jobs, folded to the last event", func() bool {
		list("?limit=10")
		return page.Total == 4 && page.Seq >= last
	})
	if page.Counts[events.StatusSucceeded] != 1 || page.Counts[events.StatusFailed] != 2 || page.Counts[events.StatusSubmitted] != 1 ||
		strings.Join(page.Clusters, ",") != "c1,c2" {
		t.Errorf("counts %v, clusters %v", page.Counts, page.Clusters)
	}
	list("?root=true")
	roots := map[string]JobView{}
	for _, v := range page.Jobs {
		roots[v.ID] = v
	}
	if len(page.Jobs) != 2 || roots[group].Children != 2 || roots[lone].ID != lone {
		t.Errorf("roots: %+v", page.Jobs)
	}
	list("?parent=" + group)
	if len(page.Jobs) != 2 || page.Jobs[0].Parent != group || page.Jobs[1].Parent != group {
		t.Errorf("the group's jobs: %+v", page.Jobs)
	}
	list("?q=TASK_1")
	if len(page.Jobs) != 1 || page.Jobs[0].ID != child2 {
		t.Errorf("search: %+v", page.Jobs)
	}
	list("?state=failed")
	if page.Total != 2 || page.Counts[events.StatusSucceeded] != 1 {
		t.Errorf("a state filter leaves the counts of the others: total %d, counts %v", page.Total, page.Counts)
	}
	var who struct {
		Principal string
		Allow     []string
	}
	if getJSON(t, s.URL+"/v1/whoami", &who); who.Principal != "anonymous" || len(who.Allow) == 0 {
		t.Errorf("whoami: %+v", who)
	}
}
