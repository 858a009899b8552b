package readside

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/events/eventstest"
)

// fullFold is the table's fold as it was before it read payloads reduced (foldRow): each event decoded whole by
// events.Apply, the state reduced to its row after each event. It folds evs (in stream
// order, several jobs mixed) and returns each job's row and the refused events' seqs.
func fullFold(evs []events.Event) (map[string]Row, []uint64) {
	rows := map[string]Row{}
	var refused []uint64
	for _, e := range evs {
		from, ok := rows[e.JobID]
		if ok && e.Seq <= from.LastSeq {
			continue
		}
		next, err := events.Apply(from, e)
		if err != nil {
			refused = append(refused, e.Seq)
			continue
		}
		rows[e.JobID] = strip(next)
	}
	return rows, refused
}

// rowFold folds evs into a Table (foldRow) and returns the same as fullFold.
func rowFold(t *testing.T, evs []events.Event) (map[string]Row, []uint64) {
	t.Helper()
	table := NewTable()
	var refused []uint64
	for _, e := range evs {
		if _, err := table.Apply(e); err != nil {
			refused = append(refused, e.Seq)
		}
	}
	rows := map[string]Row{}
	for _, r := range table.Rows() {
		rows[r.JobID] = r
	}
	return rows, refused
}

// shardFold folds evs as a replay's shard does (foldShard.apply: rows of its own,
// folded in place, handed to a table at the end) and returns the same as fullFold.
func shardFold(t *testing.T, evs []events.Event) (map[string]Row, []uint64) {
	t.Helper()
	s := &foldShard{rows: map[string]*foldingRow{}}
	var refused []uint64
	for _, e := range evs {
		// As the decoder says: the data was checked as JSON (events.DecodeFoldJSON).
		if err := s.apply(&e, json.Valid(e.Data)); err != nil {
			refused = append(refused, e.Seq)
		}
	}
	table := NewTable()
	table.finishReplay([]*foldShard{s}, 0)
	rows := map[string]Row{}
	for _, r := range table.Rows() {
		rows[r.JobID] = r
	}
	return rows, refused
}

// sameFold checks that the table's fold (the live projection's) and a replay shard's
// give the rows and refusals of the full fold.
func sameFold(t *testing.T, evs []events.Event) {
	t.Helper()
	wantRows, wantRefused := fullFold(evs)
	for _, c := range []struct {
		name string
		fold func(*testing.T, []events.Event) (map[string]Row, []uint64)
	}{{"table", rowFold}, {"replay shard", shardFold}} {
		gotRows, gotRefused := c.fold(t, evs)
		if diff := cmp.Diff(wantRows, gotRows); diff != "" {
			t.Errorf("%s: rows differ from the full fold's (-full +%s):\n%s", c.name, c.name, diff)
		}
		if !slices.Equal(wantRefused, gotRefused) {
			for _, e := range evs {
				if slices.Contains(wantRefused, e.Seq) != slices.Contains(gotRefused, e.Seq) {
					t.Errorf("%s: seq %d (%s %s): refused by the full fold %v, by the %s %v", c.name, e.Seq, e.Name, e.Data,
						slices.Contains(wantRefused, e.Seq), c.name, slices.Contains(gotRefused, e.Seq))
				}
			}
		}
	}
}

// Every recorded history (every event name, every end, groups, DDS sessions, restarts)
// folds to the same rows, and refuses the same events, whether the table reads the large
// payloads whole or only the fields it keeps.
func TestRowFoldEqualsFullFoldOnRecordedHistories(t *testing.T) {
	fs, err := eventstest.LoadFixtures(filepath.Join("..", "..", "events", filepath.FromSlash(eventstest.ReplayDir)))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[events.Name]bool{}
	var all []events.Event
	for _, f := range fs {
		t.Run(f.Name, func(t *testing.T) { sameFold(t, f.Events) })
		for _, e := range f.Events {
			seen[e.Name] = true
		}
		all = append(all, f.Events...)
	}
	for _, n := range events.Names() {
		if !seen[n] {
			t.Errorf("no recorded history has a %s event: the comparison does not cover it", n)
		}
	}
	// The same histories with every event folded twice and out of its job's order: the
	// table skips what it has folded and refuses what comes too early, as the full fold.
	shuffled := slices.Clone(all)
	for i := range shuffled {
		j := (i * 7919) % len(shuffled)
		shuffled[i], shuffled[j] = shuffled[j], shuffled[i]
	}
	t.Run("mixed", func(t *testing.T) { sameFold(t, append(slices.Clone(all), shuffled...)) })
}

// Generated lives of many jobs (every exit, stopped at every point) fold the same both
// ways, and so do submitted and incarnated payloads of every shape the reduction either
// reads or leaves to the whole decode: escapes, case variants, repeats, wrong types,
// nesting, spacing, data that is not an object.
func TestRowFoldEqualsFullFoldOnVariedPayloads(t *testing.T) {
	var evs []events.Event
	seq := uint64(0)
	add := func(id string, n events.Name, route string, data string) {
		seq++
		evs = append(evs, events.Event{ID: fmt.Sprintf("e%d", seq), JobID: id, Name: n, Route: route, Source: "test",
			Time: t0.Add(time.Duration(seq) * time.Second), Data: json.RawMessage(data), Seq: seq})
	}
	for n := range 40 {
		id := events.NewID()
		steps := life(id, fmt.Sprintf("c%d", n%3), n)
		for _, s := range steps[:len(steps)-n%len(steps)] {
			b, err := json.Marshal(s.Payload)
			if err != nil {
				t.Fatal(err)
			}
			add(id, s.Name, s.Route, string(b))
		}
	}
	submitted := []string{
		`{"id":%q,"name":"plain","submitter":"alice","restarts":2,"executable":"/bin/true"}`,
		`{ "executable" : "/bin/true" , "id" : %q , "name" : "spaced" , "original" : {"format":"v3-json"} }`,
		`{"id":%q,"name":"first","name":"second"}`,
		`{"id":%q,"NAME":"upper"}`,
		`{"id":%q,"n\u0061me":"escaped key"}`,
		`{"id":%q,"name":"esc\"aped \\ value \u00e9","submitter":"s\/t"}`,
		`{"id":%q,"name":5}`,
		`{"id":%q,"restarts":"two"}`,
		`{"id":%q,"kind":"group","children":["a","b"]}`,
		`{"id":%q,"original":{"format":"jrdl","path":"job[1]"},"arguments":["{\"name\":\"x\"}","}","]"]}`,
		`{"id":%q,"name":null,"parent":null}`,
		`{"id":"not-the-subject-%s"}`,
		`["%s"]`,
		`{"id":%q,"restarts":1e400}`,
		`{"id":%q,"name":"\ud800"}`,
		`{"id":%q,"name":"bad"`,
	}
	incarnated := []string{
		`{"cluster":"c1","queue":"q","scripts":{"START":{"body":"exec \"./job.sh\""}},"work_dir":"/w"}`,
		`{"Cluster":"c2"}`,
		`{"cluster":"c1","cluster":"c3"}`,
		`{"cluster":["c1"]}`,
		`{"scripts":{"cluster":{"body":"inner"}},"queue":""}`,
		`{}`,
	}
	for _, sub := range submitted {
		for _, inc := range incarnated {
			id := events.NewID()
			add(id, events.Submitted, "", fmt.Sprintf(sub, id))
			add(id, events.Incarnated, "", inc)
			add(id, events.Queued, "c1", `{"cluster":"c1"}`)
		}
	}
	sameFold(t, evs)
	// Not a comparison of two refusals: most of these are read reduced, and folded.
	reduced, folded := 0, 0
	for _, e := range evs {
		if keep := keptFields(e.Name); keep != nil {
			if _, ok := reduce(e.Data, keep, false); ok {
				reduced++
			}
		}
	}
	rows, _ := rowFold(t, evs)
	for _, r := range rows {
		if r.Status == events.StatusQueued {
			folded++
		}
	}
	if reduced < len(evs)/3 || folded < 10 {
		t.Errorf("%d payloads of %d read reduced, %d jobs queued", reduced, len(evs), folded)
	}
}

// The reduction reads the top level of a payload: a field the row does not keep is not
// judged by the table, only by a reader that decodes the payload whole (the job read,
// the audit). This is the one way the two folds may part, and only for an event the store
// did not write, since the store decodes a job whole before appending it.
func TestRowFoldDoesNotJudgeWhatTheRowDropsOf(t *testing.T) {
	id := events.NewID()
	sub := events.Event{ID: "e1", JobID: id, Name: events.Submitted, Source: "test", Time: t0, Seq: 1,
		Data: json.RawMessage(fmt.Sprintf(`{"id":%q,"name":"n","no_such_field":1}`, id))}
	inc := events.Event{ID: "e2", JobID: id, Name: events.Incarnated, Source: "test", Time: t0, Seq: 2,
		Data: json.RawMessage(`{"cluster":"c1","work_dir":5}`)}
	if _, err := events.Apply(events.State{}, sub); err == nil {
		t.Fatal("the full fold takes a job with a field no schema has")
	}
	if _, err := events.Apply(events.State{JobID: id, Status: events.StatusSubmitted}, inc); err == nil {
		t.Fatal("the full fold takes a work_dir that is a number")
	}
	table := NewTable()
	for _, e := range []events.Event{sub, inc} {
		if _, err := table.Apply(e); err != nil {
			t.Fatalf("the table refuses %s for what it does not keep: %v", e.Name, err)
		}
	}
	if r, _ := table.Row(id); r.Job == nil || r.Job.Name != "n" || r.Status != events.StatusIncarnated || r.Cluster != "c1" {
		t.Fatalf("row %+v", r)
	}
}

// FuzzSkipValue: in a valid JSON text, skipValue ends every value where the checking
// reader (events.JSONValueEnd) ends it, and so does stringEnd a string.
func FuzzSkipValue(f *testing.F) {
	for _, s := range []string{`{"a":"b\\"}`, `"\\\""`, `["x\"y",{"k":[1,-2.5e3,true,null]},""]`, ` 12 `, `{}`,
		`{"scripts":{"START":{"body":"#!/bin/sh\necho \"$1\" \\\n","sha256":"ab"}},"work_dir":"/w"}`, `"\u00e9\/"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if json.Valid(b) {
			checkSkips(t, b, skipWS(b, 0))
		}
	})
}

// checkSkips compares skipValue with events.JSONValueEnd on the value at b[i] and, in an
// object or array, on each of its members, and returns where the value ends.
func checkSkips(t *testing.T, b []byte, i int) int {
	want, ok := events.JSONValueEnd(b, i)
	if !ok {
		t.Fatalf("%q at %d: no value", b, i)
	}
	if got := skipValue(b, i); got != want {
		t.Fatalf("%q at %d: skipValue ends at %d, JSONValueEnd at %d", b, i, got, want)
	}
	if b[i] == '"' {
		if got, _ := stringEnd(b, i, true); got != want {
			t.Fatalf("%q at %d: stringEnd ends at %d, JSONValueEnd at %d", b, i, got, want)
		}
	}
	if b[i] != '{' && b[i] != '[' {
		return want
	}
	for j := skipWS(b, i+1); b[j] != '}' && b[j] != ']'; {
		if b[i] == '{' {
			k, _ := events.JSONStringEnd(b, j)
			if got, _ := stringEnd(b, j, true); got != k {
				t.Fatalf("%q at %d: a key ends at %d, JSONStringEnd says %d", b, j, got, k)
			}
			j = skipWS(b, skipWS(b, k)+1) // past the colon
		}
		if j = skipWS(b, checkSkips(t, b, j)); b[j] == ',' {
			j = skipWS(b, j+1)
		}
	}
	return want
}

// FuzzReduce holds the reduction to encoding/json: whatever it reads, it reads as a
// decode of the whole payload reads the kept fields.
func FuzzReduce(f *testing.F) {
	for _, s := range []string{`{"id":"a","name":"b","x":[1,{"name":"c"}]}`, `{"cluster":"c","queue":"q","scripts":{}}`,
		`{"name":"a","name":"b"}`, `{"Name":"a"}`, ` { } `, `[]`, `{"id":"\u0041"}`, `{"restarts":3,"kind":"group"}`,
		`{"a":[-0.5e+3,1E2,true,false,null,"\u00e9\n"],"b":{}}`, `{"a":01}`, `{"a":"\x"}`, `{"a":tru}`, `{"a":1,}`,
		`{"original":{"format":"jrdl","path":"job[2]","bytes":"e30="},"dds":{"collection_path":"main/c_1","task_index":2}}`,
		`{"original":null,"dds":5}`, `{"original":{"PATH":"x"}}`, `{"original":{"path":"a","path":"b"}}`,
		"{\"\u017fubmitter\":\"long s\",\"\u212aind\":\"kelvin\"}", `{"submitte":"x","submitters":"y"}`} {
		f.Add([]byte(s))
	}
	keep := keptFields(events.Submitted)
	type summary struct {
		ID, Name, Kind, Parent, Submitter string
		Restarts                          int
		Original                          struct{ Path string }
		DDS                               *struct {
			CollectionPath string `json:"collection_path"`
		}
	}
	f.Fuzz(func(t *testing.T, payload []byte) {
		// The values the reader skips are checked by events.JSONValueEnd, which
		// events' FuzzValidJSON holds to json.Valid.
		reduced, ok := reduce(payload, keep, false)
		// A payload the decoder checked is skipped through, not checked again: the
		// same reduction.
		if json.Valid(payload) {
			if again, okAgain := reduce(payload, keep, true); okAgain != ok || string(again) != string(reduced) {
				t.Fatalf("%q: reduced to %q (%v) checking, to %q (%v) skipping", payload, reduced, ok, again, okAgain)
			}
		}
		if !ok {
			return
		}
		if !json.Valid(payload) || !json.Valid(reduced) {
			t.Fatalf("reduced %q to %q", payload, reduced)
		}
		var whole, part map[string]json.RawMessage
		_ = json.Unmarshal(payload, &whole)
		_ = json.Unmarshal(reduced, &part)
		for _, k := range keep {
			if k.sub == nil && string(whole[k.name]) != string(part[k.name]) {
				t.Fatalf("%s: %q reduced to %q", k.name, payload, reduced)
			}
		}
		if len(part) > len(keep) {
			t.Fatalf("%q reduced to %q: more than the kept fields", payload, reduced)
		}
		var a, b summary
		errA, errB := json.Unmarshal(payload, &a), json.Unmarshal(reduced, &b)
		if (errA == nil) != (errB == nil) || !cmp.Equal(a, b) {
			t.Fatalf("%q: whole %+v (%v), reduced %q %+v (%v)", payload, a, errA, reduced, b, errB)
		}
	})
}

// BenchmarkFoldRecorded folds every recorded history (real payloads: canonical jobs,
// incarnations with their rendered scripts) into a fresh table, the table's way and the
// way it was (every payload decoded whole); events decoded beforehand.
func BenchmarkFoldRecorded(b *testing.B) {
	fs, err := eventstest.LoadFixtures(filepath.Join("..", "..", "events", filepath.FromSlash(eventstest.ReplayDir)))
	if err != nil {
		b.Fatal(err)
	}
	var evs []events.Event
	for _, f := range fs {
		evs = append(evs, f.Events...)
	}
	b.Run("table", func(b *testing.B) {
		for b.Loop() {
			t := NewTable()
			for _, e := range evs {
				_, _ = t.Apply(e)
			}
		}
		b.ReportMetric(float64(b.N*len(evs))/b.Elapsed().Seconds(), "events/s")
	})
	b.Run("whole", func(b *testing.B) {
		for b.Loop() {
			fullFold(evs)
		}
		b.ReportMetric(float64(b.N*len(evs))/b.Elapsed().Seconds(), "events/s")
	})
}

// A replay's shards fold into one table at once, each job in one shard: the rows are the
// sequential fold's.
func TestTableFoldsShardsConcurrently(t *testing.T) {
	fs, err := eventstest.LoadFixtures(filepath.Join("..", "..", "events", filepath.FromSlash(eventstest.ReplayDir)))
	if err != nil {
		t.Fatal(err)
	}
	var all []events.Event
	for _, f := range fs {
		all = append(all, f.Events...)
	}
	want, _ := fullFold(all)
	const shards = 4
	table := NewTable()
	var wg sync.WaitGroup
	for s := range shards {
		wg.Go(func() {
			for _, e := range all {
				if shardOf(events.Subject(e.JobID, e.Name, e.Route), shards) == s {
					_, _ = table.Apply(e)
				}
			}
		})
	}
	wg.Wait()
	got := map[string]Row{}
	for _, r := range table.Rows() {
		got[r.JobID] = r
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("rows differ from the sequential fold's (-sequential +shards):\n%s", diff)
	}
	if ids := table.Meta().Jobs; ids != len(want) || !slices.IsSorted(table.order) {
		t.Fatalf("%d jobs, want %d; order sorted %v", ids, len(want), slices.IsSorted(table.order))
	}
}
