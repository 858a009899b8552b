package events

import (
	"bytes"
	"encoding/base64"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// storeBodies are bodies as Store writes them: every event name, with and without the
// chain extensions and a principal, with the route a cluster-bound event has.
func storeBodies(tb testing.TB) [][]byte {
	var out [][]byte
	id := "01JDJ7Q1ZQ3S2K2B9Y4N3Y8W5A"
	at := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	payload := func(n Name) any {
		switch n {
		case Submitted:
			return Job{ID: id, Name: "caf\u00e9 <job>", Executable: "/bin/echo", Arguments: []string{"a b", `"q"`}}
		case Started:
			return StartedData{Cluster: "c1", NativeID: "42", Running: true}
		}
		return NewPayload(n)
	}
	for i, n := range Names() {
		e, err := New(id, n, "c1", at.Add(time.Duration(i)*time.Millisecond+7), payload(n))
		if err != nil {
			tb.Fatal(err)
		}
		e.Source = "gridwire/test/host-1"
		if i > 0 {
			e.PrevHash, e.PrevSeq, e.Principal = "ab12", uint64(i), "alice \u00e9"
		}
		body, err := e.Encode()
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, body)
	}
	return out
}

// The fast path reads every body Store writes, and every body in the spelling it wrote
// before (data in base64), exactly as the CloudEvents SDK reads it.
func TestFastDecodeMatchesSDK(t *testing.T) {
	var bodies [][]byte
	for _, body := range storeBodies(t) {
		bodies = append(bodies, body, oldSpelling(t, body))
	}
	for _, body := range bodies {
		want, err := decodeSDK(body)
		if err != nil {
			t.Fatal(err)
		}
		got, err := scanEnvelope(body)
		if err != nil {
			t.Fatalf("the fast path refused a store-written body: %v\n%s", err, body)
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Fatalf("decoders differ (-SDK +fast):\n%s\n%s", d, body)
		}
	}
}

// A body the fast path leaves alone (escapes, a numeric extension) still decodes, by the SDK.
func TestDecodeFallsBackToSDK(t *testing.T) {
	body := []byte(`{"specversion":"1.0","id":"x","source":"s","type":"dev.gridwire.job.held.v1","subject":"J",` +
		`"datacontenttype":"application/json","time":"2026-01-01T00:00:00Z","principal":"a\"b","data":{}}`)
	if _, err := scanEnvelope(body); err == nil {
		t.Fatal("the fast path took a body with an escape")
	}
	e, err := Decode(body)
	if err != nil {
		t.Fatal(err)
	}
	if e.Principal != `a"b` || e.Name != Held || e.Hash != HashOf(body) {
		t.Fatalf("decoded %+v", e)
	}
}

// DecodeStored keeps the stream's sequence, subject and route, and leaves Hash empty.
func TestDecodeStored(t *testing.T) {
	body := storeBodies(t)[5]
	subject := Subject("01JDJ7Q1ZQ3S2K2B9Y4N3Y8W5A", Started, "c1")
	e, err := DecodeStored(body, subject, 42)
	if err != nil {
		t.Fatal(err)
	}
	if e.Seq != 42 || e.Subject != subject || e.Route != "c1" || e.Hash != "" || e.Name != Started {
		t.Fatalf("decoded %+v", e)
	}
	bad, err := DecodeStored([]byte("{"), subject, 43)
	if err == nil || bad.Seq != 43 || bad.Subject != subject {
		t.Fatalf("a bad body: %+v, %v", bad, err)
	}
}

// FuzzFastDecode: whatever the fast path accepts, the SDK accepts the same way.
func FuzzFastDecode(f *testing.F) {
	for _, b := range storeBodies(f) {
		f.Add(b)
		f.Add(oldSpelling(f, b))
	}
	f.Add([]byte(`{"specversion":"1.0","id":"x","source":"s","type":"dev.gridwire.job.held.v1","subject":"J","datacontenttype":"application/json","time":"2026-01-01T00:00:00Z","data":{"a":"\"}"}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		got, err := scanEnvelope(body)
		if err != nil {
			return
		}
		want, err := decodeSDK(body)
		if err != nil {
			t.Fatalf("fast path accepted what the SDK refuses (%v):\n%s", err, body)
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Fatalf("decoders differ:\n%s\n%s", d, body)
		}
	})
}

// oldSpelling is a body as Encode wrote it before: the data in data_base64.
func oldSpelling(tb testing.TB, body []byte) []byte {
	e, err := Decode(body)
	if err != nil {
		tb.Fatal(err)
	}
	old := bytes.Replace(body, append([]byte(`"data":`), e.Data...), []byte(`"data_base64":"`+base64.StdEncoding.EncodeToString(e.Data)+`"`), 1)
	if bytes.Equal(old, body) {
		tb.Fatalf("no data member in %s", body)
	}
	return old
}

// BenchmarkDecode reads store-written bodies with Decode (the fast path) beside the
// CloudEvents SDK alone, the yardstick, each with the chain hash Decode computes; and
// bodies stored before the data was written as JSON (fast-base64).
func BenchmarkDecode(b *testing.B) {
	bodies := storeBodies(b)
	var olds [][]byte
	for _, body := range bodies {
		olds = append(olds, oldSpelling(b, body))
	}
	for _, c := range []struct {
		name   string
		decode func([]byte) (Event, error)
	}{
		{"fast", Decode},
		{"fast-base64", nil},
		{"sdk", func(body []byte) (Event, error) {
			e, err := decodeSDK(body)
			e.Hash = HashOf(body)
			return e, err
		}},
		{"stored", func(body []byte) (Event, error) { return DecodeStored(body, "jobs.J.held._", 1) }},
		{"fold", func(body []byte) (Event, error) {
			return DecodeFold(body, "jobs.01JDJ7Q1ZQ3S2K2B9Y4N3Y8W5A.held._", 1)
		}},
	} {
		in, decode := bodies, c.decode
		if decode == nil {
			in, decode = olds, Decode
		}
		b.Run(c.name, func(b *testing.B) {
			start := cpuTime()
			for i := 0; b.Loop(); i++ {
				if _, err := decode(in[i%len(in)]); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
			b.ReportMetric(float64((cpuTime()-start).Nanoseconds())/float64(b.N), "cpu-ns/op")
		})
	}
}
