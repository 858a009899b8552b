package main

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
)

// A submission answers 201 with the job's (or the group's) Location, which serves it.
func TestSubmitAnswersWithLocation(t *testing.T) {
	server := serveCLI(t)
	resp, err := http.Post(server+"/v1/jobs", "application/json", strings.NewReader(`{"version":3,"executable":"/bin/true"}`))
	if err != nil {
		t.Fatal(err)
	}
	var acc accepted
	_ = json.NewDecoder(resp.Body).Decode(&acc)
	resp.Body.Close()
	loc := resp.Header.Get("Location")
	if resp.StatusCode != http.StatusCreated || len(acc.Jobs) != 1 || loc != "/v1/jobs/"+acc.Jobs[0] {
		t.Fatalf("POST /v1/jobs: %d, Location %q, jobs %v", resp.StatusCode, loc, acc.Jobs)
	}
	if code, body := request(t, "GET", server+loc, "", nil); code != http.StatusOK || !strings.Contains(body, acc.Jobs[0]) {
		t.Errorf("GET %s: %d %s", loc, code, body)
	}
}

// countingReader is an endless body that counts what was read of it.
type countingReader struct{ n atomic.Int64 }

func (c *countingReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = ' '
	}
	c.n.Add(int64(len(p)))
	return len(p), nil
}

// A document over the limit is refused from its announced length, not read whole.
func TestLargeDocumentRefusedBeforeItIsRead(t *testing.T) {
	server := serveCLI(t)
	const size = 60 << 20
	body := &countingReader{}
	req, _ := http.NewRequest("POST", server+"/v1/jobs", io.LimitReader(body, size))
	req.ContentLength = size
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("the server should answer, not drop the connection: %v", err)
	}
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(string(data), "document_too_large") {
		t.Errorf("60 MB document: %d %s", resp.StatusCode, data)
	}
	if sent := body.n.Load(); sent >= size {
		t.Errorf("the whole %d bytes were sent before the refusal", sent)
	}
}
