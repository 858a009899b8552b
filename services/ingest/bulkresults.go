package ingest

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
)

// writeResults answers a bulk submission: 200 with {"results": [...]}, byte for byte
// what httpapi.WriteJSON writes (two-space indents, a final newline), with each accepted
// item's result written directly: through encoding/json's reflection and its indenting
// pass, the answer cost more per item than reading the item. A result with an error,
// or with an ID that is not plain (letters, digits, '-' and '_'), is written by
// encoding/json itself. TestWriteResultsMatchesWriteJSON holds the two together.
func writeResults(w http.ResponseWriter, results []Result) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(appendResults(make([]byte, 0, 64+len(results)*96), results))
}

func appendResults(b []byte, results []Result) []byte {
	switch {
	case results == nil:
		return append(b, "{\n  \"results\": null\n}\n"...)
	case len(results) == 0:
		return append(b, "{\n  \"results\": []\n}\n"...)
	}
	b = append(b, "{\n  \"results\": ["...)
	for i := range results {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, "\n    "...)
		b = appendResult(b, &results[i])
	}
	return append(b, "\n  ]\n}\n"...)
}

// appendResult appends one result as an element of the results list, indented as
// encoding/json indents it there.
func appendResult(b []byte, r *Result) []byte {
	if r.Error != nil || !plainID(r.Parent) || !allPlainIDs(r.Jobs) {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetIndent("    ", "  ")
		_ = enc.Encode(r) // ints and strings: nothing it refuses (as httpapi.WriteJSON)
		return append(b, bytes.TrimSuffix(buf.Bytes(), []byte("\n"))...)
	}
	b = append(b, "{\n      \"index\": "...)
	b = strconv.AppendInt(b, int64(r.Index), 10)
	b = append(b, ",\n      \"status\": "...)
	b = strconv.AppendInt(b, int64(r.Status), 10)
	if len(r.Jobs) > 0 {
		b = append(b, ",\n      \"jobs\": ["...)
		for i, id := range r.Jobs {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, "\n        \""...)
			b = append(b, id...)
			b = append(b, '"')
		}
		b = append(b, "\n      ]"...)
	}
	if r.Parent != "" {
		b = append(b, ",\n      \"parent\": \""...)
		b = append(b, r.Parent...)
		b = append(b, '"')
	}
	return append(b, "\n    }"...)
}

// plainID reports whether id is written in JSON as it is: letters, digits, '-' and '_'
// (what a job ID is).
func plainID(id string) bool {
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= '0' && c <= '9' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

func allPlainIDs(ids []string) bool {
	for _, id := range ids {
		if !plainID(id) {
			return false
		}
	}
	return true
}
