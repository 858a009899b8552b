package ingest

import (
	"context"
	"encoding/json"
	"math"
	"net/http"
	"net/http/httptest"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/events/eventstest"
	"github.com/gridwire/gridwire/pkg/httpapi"
)

// A bulk submission answers every item on its own: accepted ones with their jobs (each
// stored once), a refused one with the error a single submission would get, and a keyed
// item sent again with the same jobs as the first time.
func TestBulkSubmissionAnswersEachItem(t *testing.T) {
	b, st := eventstest.Open(t, "test/ingest")
	svc, err := New(Config{}, Deps{Store: st, Keys: KVKeys{JS: b.JS}})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	svc.Routes(mux)
	post := func(body string) []Result {
		t.Helper()
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/jobs/bulk", strings.NewReader(body)))
		if rec.Code != http.StatusOK {
			t.Fatalf("status %d: %s", rec.Code, rec.Body)
		}
		var out struct{ Results []Result }
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
			t.Fatal(err)
		}
		return out.Results
	}
	ndjson := `{"file":"a.json","description":"{\"version\":3,\"executable\":\"/bin/true\"}","idempotency_key":"k-a"}

{"file":"bad.json","description":"{\"version\":3}"}
{"description":"{\"version\":3,\"executable\":\"/bin/echo\",\"arguments\":[\"hi\"]}"}
`
	first := post(ndjson)
	got := make([]int, len(first))
	for i, r := range first {
		got[i] = r.Status
	}
	if d := cmp.Diff([]int{201, 422, 201}, got); d != "" {
		t.Fatalf("statuses (-want +got):\n%s\n%+v", d, first)
	}
	if first[1].Error == nil || first[1].Error.Code != "invalid_description" || !strings.Contains(first[1].Error.Detail, "bad.json") {
		t.Fatalf("refused item: %+v", first[1].Error)
	}
	for _, i := range []int{0, 2} {
		if len(first[i].Jobs) != 1 {
			t.Fatalf("item %d: %+v", i, first[i])
		}
		if names := eventstest.Names(t, st, first[i].Jobs[0]); len(names) != 1 {
			t.Fatalf("item %d's job has %v", i, names)
		}
	}

	// The same items again as a JSON array: the keyed one is the same job, stored once.
	arr := `[{"file":"a.json","description":"{\"version\":3,\"executable\":\"/bin/true\"}","idempotency_key":"k-a"},
	  {"description":"{\"version\":3,\"executable\":\"/bin/echo\",\"arguments\":[\"hi\"]}"}]`
	again := post(arr)
	if again[0].Status != 201 || again[0].Jobs[0] != first[0].Jobs[0] {
		t.Fatalf("keyed item again: %+v, want job %s", again[0], first[0].Jobs[0])
	}
	if names := eventstest.Names(t, st, first[0].Jobs[0]); len(names) != 1 {
		t.Fatalf("keyed job after a repeat: %v", names)
	}
	if again[1].Jobs[0] == first[2].Jobs[0] {
		t.Fatal("an unkeyed item sent twice is two jobs")
	}
}

// A body that is not a list of items is refused whole, naming the item and its line.
func TestBulkBodyErrorsNameTheItem(t *testing.T) {
	for body, want := range map[string]string{
		`{"description":"x"}` + "\n" + `{"descripton":"x"}`:   "line 2 (item 1)",
		`[{"description":""}]`:                                "item 0: description",
		`[{"description":"x"},{"description":"y","fil":"a"}]`: "item 1: json: unknown field",
		`[{"description":"x"},"y"]`:                           "item 1: json: cannot unmarshal",
		`[{"description":"x"},]`:                              "not a JSON array",
		`[{"description":"x"}] {}`:                            "not a JSON array",
		"{\"description\":\"x\"}\n\n{\"description\":5}":      "line 3 (item 1): json: cannot unmarshal",
		"{\"description\":\"x\"}\r\n{\"description\":\"x\",":  "line 2 (item 1)",
		"{\"description\":\"x\"}\n{}":                         "line 2 (item 1): description",
		``:                                                    "no item",
	} {
		_, err := ParseBulk([]byte(body))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", body, err, want)
		}
	}
}

// The items of a body are read alike whether it is NDJSON (blank lines, CRLF and
// indentation allowed) or a JSON array, each with every field, in order.
func TestBulkBodyReadsEveryItem(t *testing.T) {
	want := []Item{
		{File: "a.json", Description: `{"version":3}`, IdempotencyKey: "k"},
		{Format: "jsdl", ContentType: "application/xml", Description: "<x/>"},
		{Description: "z"},
	}
	ndjson := "  {\"file\":\"a.json\",\"description\":\"{\\\"version\\\":3}\",\"idempotency_key\":\"k\"}\r\n\n" +
		"{\"format\":\"jsdl\",\"content_type\":\"application/xml\",\"description\":\"<x/>\"}\n" +
		"{\"description\":\"z\"}"
	arr := "[" + strings.ReplaceAll(strings.TrimSpace(strings.ReplaceAll(ndjson, "\r\n\n", "\n")), "\n", ",") + "]"
	for _, body := range []string{ndjson, arr} {
		got, err := ParseBulk([]byte(body))
		if err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("%s (-want +got):\n%s", body, d)
		}
	}
}

// gcStore records the collector's GOGC when its jobs are stored.
type gcStore struct {
	memStore
	percent int
}

func (g *gcStore) CreateAll(ctx context.Context, evs []events.Event) ([]uint64, []error) {
	g.percent = debug.SetGCPercent(-1)
	debug.SetGCPercent(g.percent)
	errs := make([]error, len(evs))
	for i, e := range evs {
		_, errs[i] = g.Create(ctx, e)
	}
	return make([]uint64, len(evs)), errs
}

// A bulk submission of relaxGCItems or more relaxes the collector while its jobs are
// prepared and stored and puts the process's setting back after; a smaller one leaves
// it alone.
func TestBulkSubmissionRelaxesTheCollector(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(math.MaxInt64))
	store := &gcStore{}
	svc, err := New(Config{}, Deps{Store: store})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ items, during int }{{relaxGCItems, relaxedGCPercent}, {relaxGCItems - 1, 100}} {
		subs := make([]Submission, c.items)
		for i := range subs {
			subs[i] = Submission{File: "a.json", Data: []byte(`{"version":3,"executable":"/bin/true"}`)}
		}
		for _, r := range svc.SubmitAll(t.Context(), subs) {
			if r.Error != nil {
				t.Fatal(r.Error)
			}
		}
		if store.percent != c.during {
			t.Errorf("%d items: GOGC %d while stored, want %d", c.items, store.percent, c.during)
		}
		if p := debug.SetGCPercent(100); p != 100 || debug.SetMemoryLimit(-1) != math.MaxInt64 {
			t.Errorf("%d items: GOGC %d, limit %d after", c.items, p, debug.SetMemoryLimit(-1))
		}
	}
}

// The bulk answer is written as httpapi.WriteJSON writes it, byte for byte: accepted
// items directly, and items with an error, odd IDs or none by encoding/json.
func TestWriteResultsMatchesWriteJSON(t *testing.T) {
	id := events.NewID()
	cases := [][]Result{
		nil,
		{},
		{{Index: 0, Status: 201, Jobs: []string{id}}},
		{{Index: 0, Status: 201, Jobs: []string{id, id, id}, Parent: id}, {Index: 1, Status: 201, Jobs: []string{}},
			{Index: 2, Status: 400, Error: httpapi.Errorf(400, "invalid_description", "a.json:1:2: x: <bad> & \"quoted\"\n")},
			{Index: 3, Status: 201, Jobs: []string{"a<b", "é\u2028"}}, {Index: 4, Status: 201, Parent: "p\x00"},
			{Index: 5, Status: 500, Jobs: []string{id}, Error: &httpapi.Error{Status: 500, Code: "c", Detail: "d", Details: []string{"e", "f"}}},
			{Index: -1, Status: 0}},
	}
	for i, results := range cases {
		want := httptest.NewRecorder()
		httpapi.WriteJSON(want, http.StatusOK, struct {
			Results []Result `json:"results"`
		}{results})
		got := httptest.NewRecorder()
		writeResults(got, results)
		if got.Code != want.Code || got.Header().Get("Content-Type") != want.Header().Get("Content-Type") {
			t.Errorf("case %d: status %d, %q; want %d, %q", i, got.Code, got.Header().Get("Content-Type"), want.Code, want.Header().Get("Content-Type"))
		}
		if d := cmp.Diff(want.Body.String(), got.Body.String()); d != "" {
			t.Errorf("case %d (-WriteJSON +writeResults):\n%s", i, d)
		}
	}
}
