package ingest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/pkg/httpapi"
)

// MaxBulkItems bounds the descriptions of one bulk submission, and MaxBulkBytes its body.
const (
	MaxBulkItems = 10000
	MaxBulkBytes = 64 << 20
)

// relaxGCItems is the smallest bulk submission during which the collector is relaxed
// (relaxGC): a few items allocate too little to matter.
const relaxGCItems = 64

// BulkStore is a Store that appends many new jobs' first events in one pipelined go
// (events.Store.CreateAll); SubmitAll uses it when the store has it.
type BulkStore interface {
	CreateAll(ctx context.Context, evs []events.Event) ([]uint64, []error)
}

// Item is one description of a bulk submission, as a line of NDJSON or an element of a
// JSON array: the description itself as a string, and what a single submission says
// in its query and headers.
type Item struct {
	File           string  `json:"file,omitempty"`
	Format         string  `json:"format,omitempty"`
	ContentType    string  `json:"content_type,omitempty"`
	Description    string  `json:"description"`
	IdempotencyKey string  `json:"idempotency_key,omitempty"`
	Uploads        Uploads `json:"uploads"` // {} : the client uploads local inputs asked for
}

// Result is one item's outcome: the jobs it created, or why it was refused (the error
// a single submission of it would have answered, with its status).
type Result struct {
	Index  int            `json:"index"`
	Status int            `json:"status"`
	Jobs   []string       `json:"jobs,omitempty"`
	Parent string         `json:"parent,omitempty"`
	Error  *httpapi.Error `json:"error,omitempty"`
}

// SubmitAll submits many documents, each accepted or refused on its own as Submit would
// (its own idempotency key, its own errors), with every accepted job's submitted event
// appended in one pipelined go: the answer comes once all are acknowledged.
func (s *Service) SubmitAll(ctx context.Context, subs []Submission) []Result {
	if len(subs) >= relaxGCItems {
		relaxGC()
		defer restoreGC()
	}
	results := make([]Result, len(subs))
	preps := make([]prepared, len(subs))
	all := make([]events.Event, 0, len(subs)) // one job an item, the usual case
	for i, sub := range subs {
		results[i].Index = i
		p, err := s.prepare(ctx, sub)
		if err != nil {
			results[i].refuse(err)
			continue
		}
		preps[i] = p
		all = append(all, p.events...)
	}
	errs := s.createAll(ctx, all)
	for i, p := range preps {
		if results[i].Error != nil {
			continue
		}
		acc := p.accepted()
		results[i].Status, results[i].Jobs, results[i].Parent = http.StatusCreated, acc.Jobs, acc.Parent
		for j, e := range p.events {
			if err := errs[0]; p.failed(err) {
				results[i].Jobs = acc.Jobs[:j]
				results[i].refuse(fmt.Errorf("storing job %s: %w", e.JobID, err))
				errs = errs[len(p.events)-j:]
				break
			}
			errs = errs[1:]
		}
	}
	return results
}

func (r *Result) refuse(err error) {
	r.Error = apiError(err)
	r.Status = r.Error.Status
}

// createAll stores new jobs' first events, pipelined when the store can.
func (s *Service) createAll(ctx context.Context, evs []events.Event) []error {
	if bs, ok := s.deps.Store.(BulkStore); ok {
		_, errs := bs.CreateAll(ctx, evs)
		return errs
	}
	errs := make([]error, len(evs))
	for i, e := range evs {
		_, errs[i] = s.deps.Store.Create(ctx, e)
	}
	return errs
}

// ServeBulk handles POST /v1/jobs/bulk: a JSON array of Items, or NDJSON (one Item a
// line). The answer is 200 with {"results": [...]}, one Result per item in order; an
// item refused does not stop the others. A body that is not a list of items is refused
// whole, naming the item and what is wrong with it.
func (s *Service) ServeBulk(w http.ResponseWriter, r *http.Request) {
	if r.ContentLength > MaxBulkBytes {
		httpapi.WriteError(w, httpapi.Errorf(http.StatusRequestEntityTooLarge, "bulk_too_large",
			"the body is %d bytes, over the limit of %d for a bulk submission", r.ContentLength, MaxBulkBytes))
		return
	}
	data, err := io.ReadAll(io.LimitReader(r.Body, MaxBulkBytes+1))
	if err != nil {
		httpapi.WriteError(w, httpapi.Errorf(http.StatusBadRequest, "unreadable_body", "%v", err))
		return
	}
	if len(data) > MaxBulkBytes {
		httpapi.WriteError(w, httpapi.Errorf(http.StatusRequestEntityTooLarge, "bulk_too_large",
			"the body is over the limit of %d bytes for a bulk submission", MaxBulkBytes))
		return
	}
	items, err := ParseBulk(data)
	if err != nil {
		httpapi.WriteError(w, err)
		return
	}
	subs := make([]Submission, len(items))
	for i, it := range items {
		subs[i] = Submission{File: it.File, Data: []byte(it.Description), ContentType: it.ContentType, Format: it.Format,
			Submitter: httpapi.PrincipalFrom(r.Context()), Uploads: it.Uploads, IdempotencyKey: it.IdempotencyKey}
		if subs[i].File == "" {
			subs[i].File = fmt.Sprintf("(item %d)", i)
		}
	}
	writeResults(w, s.SubmitAll(r.Context(), subs))
}

// ParseBulk reads a bulk body: a JSON array of items when its first non-space byte is
// '[', else NDJSON (blank lines skipped). Errors name the item (and, for NDJSON, its
// line).
func ParseBulk(data []byte) ([]Item, error) {
	trimmed := bytes.TrimLeft(data, " \t\r\n")
	var items []Item
	if len(trimmed) > 0 && trimmed[0] == '[' {
		if err := validArray(trimmed); err != nil {
			return nil, httpapi.Errorf(http.StatusBadRequest, "bad_bulk", "the body is not a JSON array of items: %v", err)
		}
		// The array is well formed: its items are read by one decoder, in place, rather
		// than copied out one by one and each read by a decoder of its own.
		dec := json.NewDecoder(bytes.NewReader(trimmed))
		dec.DisallowUnknownFields()
		if _, err := dec.Token(); err != nil { // [
			return nil, httpapi.Errorf(http.StatusBadRequest, "bad_bulk", "the body is not a JSON array of items: %v", err)
		}
		for i := 0; dec.More(); i++ {
			var it Item
			if err := dec.Decode(&it); err != nil {
				return nil, httpapi.Errorf(http.StatusBadRequest, "bad_bulk", "item %d: %v", i, err)
			}
			if err := checkItem(it); err != nil {
				return nil, httpapi.Errorf(http.StatusBadRequest, "bad_bulk", "item %d: %v", i, err)
			}
			items = append(items, it)
		}
	} else {
		sc := bufio.NewScanner(bytes.NewReader(data))
		sc.Buffer(nil, MaxBulkBytes)
		// A line that is one JSON object is read by a decoder shared by all lines, fed
		// one line at a time; any other line by a decoder of its own, whose error or
		// leniency (what follows a first value on the line) is the answer as before.
		var next lineReader
		shared := json.NewDecoder(&next)
		shared.DisallowUnknownFields()
		for line := 1; sc.Scan(); line++ {
			text := bytes.TrimSpace(sc.Bytes())
			if len(text) == 0 {
				continue
			}
			var it Item
			var err error
			if text[0] == '{' && json.Valid(text) {
				next.b = text
				if err = shared.Decode(&it); err == nil {
					err = checkItem(it)
				}
			} else {
				it, err = parseItem(sc.Bytes())
			}
			if err != nil {
				return nil, httpapi.Errorf(http.StatusBadRequest, "bad_bulk", "line %d (item %d): %v", line, len(items), err)
			}
			items = append(items, it)
		}
		if err := sc.Err(); err != nil {
			return nil, httpapi.Errorf(http.StatusBadRequest, "bad_bulk", "%v", err)
		}
	}
	switch {
	case len(items) == 0:
		return nil, httpapi.Errorf(http.StatusBadRequest, "bad_bulk", "no item in the body")
	case len(items) > MaxBulkItems:
		return nil, httpapi.Errorf(http.StatusRequestEntityTooLarge, "bulk_too_large",
			"%d items, over the limit of %d for one bulk submission", len(items), MaxBulkItems)
	}
	return items, nil
}

func parseItem(b []byte) (Item, error) {
	var it Item
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&it); err != nil {
		return it, err
	}
	return it, checkItem(it)
}

// lineReader hands a decoder one line, then io.EOF until given the next.
type lineReader struct{ b []byte }

func (r *lineReader) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.b)
	r.b = r.b[n:]
	return n, nil
}

// checkItem refuses an item without a description.
func checkItem(it Item) error {
	if it.Description == "" {
		return fmt.Errorf("description: missing or empty")
	}
	return nil
}

// validArray reports why data (which starts with '[') is not one JSON array, in the
// words json.Unmarshal uses.
func validArray(data []byte) error {
	if json.Valid(data) {
		return nil
	}
	var raw []json.RawMessage
	return json.Unmarshal(data, &raw)
}
