package events

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// encodeCase is an event built from fuzzable parts, as Store hands them to Encode.
func encodeCase(id, source, job, principal, prevhash, signer, signature string, data []byte, prevseq uint64, nanos int64, name int) Event {
	ns := Names()
	return Event{ID: id, Name: ns[name%len(ns)], JobID: job, Source: source, Time: time.Unix(1_790_000_000, nanos%2e9).In(time.FixedZone("x", 3600)),
		Principal: principal, PrevHash: prevhash, PrevSeq: prevseq, Signer: signer, Signature: signature, Data: data}
}

// sameAsSDK fails t unless Encode and the SDK agree on e: the same bytes, or both refuse.
// It returns the body.
func sameAsSDK(t *testing.T, e Event) []byte {
	t.Helper()
	got, gerr := e.Encode()
	var want []byte
	werr := e.Validate()
	if werr == nil {
		want, werr = e.encodeSDK()
	}
	if (gerr == nil) != (werr == nil) || !bytes.Equal(got, want) {
		t.Fatalf("Encode and the SDK differ on %+v:\nEncode %v\n%s\nSDK    %v\n%s", e, gerr, got, werr, want)
	}
	return got
}

// randomString mixes what attributes hold: plain ASCII, blanks, quotes, backslashes,
// control characters, multi-byte UTF-8, U+2028, and bytes that are not UTF-8.
func randomString(r *rand.Rand, n int) string {
	pieces := []string{"a", "Z", "0", "-", "/", " ", "\"", "\\", "\n", "\r", "\t", "\x00", "\x1f", "\x7f", "é", "\u2028", "<&>", "\xff", "ULID", ":", "%", "?"}
	var b strings.Builder
	for range r.IntN(n + 1) {
		b.WriteString(pieces[r.IntN(len(pieces))])
	}
	return b.String()
}

// Encode writes exactly the bytes the CloudEvents SDK writes for thousands of events of
// every name with random attributes, or refuses exactly what the SDK refuses; and what it
// writes the SDK decodes to the event it was given.
func TestEncodeMatchesSDK(t *testing.T) {
	r := rand.New(rand.NewPCG(16, 1))
	datas := [][]byte{nil, []byte(`{}`), []byte(`{"a":"b\u00e9\"","n":[1,2.5,null,true]}`), []byte(` [ ] `), []byte(`"s"`), []byte(`{`),
		[]byte(`[{"k":"}]\\"},"\u005d"]`), []byte("{\"x\": 1}\t")}
	sources := []string{"gridwire/ingest/host-1", "", " ", "https://example.org/a?b=c#d", "a b", "%zz", "//host/x", "urn:x:y", "é"}
	for i := range 5000 {
		pick := func(plain string) string {
			if r.IntN(3) == 0 {
				return randomString(r, 6)
			}
			return plain
		}
		e := encodeCase(pick(NewID()), sources[r.IntN(len(sources))], pick("01JDJ7Q1ZQ3S2K2B9Y4N3Y8W5A"), pick("alice"),
			pick(strings.Repeat("ab", 32)), pick("UABC"), pick("c2ln"), datas[r.IntN(len(datas))], uint64(r.IntN(3))*uint64(r.Int64()), r.Int64(), i)
		if r.IntN(4) == 0 {
			e.Principal, e.PrevHash, e.Signer, e.Signature = "", "", "", ""
		}
		body := sameAsSDK(t, e)
		if body == nil {
			continue
		}
		got, err := decodeSDK(body)
		if err != nil {
			t.Fatalf("the SDK refuses what Encode wrote (%v):\n%s", err, body)
		}
		want := e
		want.ID = strings.TrimSpace(e.ID) // the SDK trims an id, whichever path wrote it
		want.Time = e.Time.UTC()
		if len(want.Data) == 0 {
			want.Data = []byte(`{}`)
		}
		if strings.ToValidUTF8(want.Principal+want.PrevHash+want.Signer+want.Signature+want.ID, "") != want.Principal+want.PrevHash+want.Signer+want.Signature+want.ID {
			continue // bytes that are not UTF-8 do not read back as written
		}
		if !plainSource(e.Source) {
			want.Source = got.Source // the SDK writes a source as url.Parse spells it
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Fatalf("decoded differs (-given +decoded):\n%s\n%s", d, body)
		}
	}
}

// Bodies stored before the data was written as a JSON value (every event of the recorded
// replay fixtures, data in data_base64) still decode, by the fast path exactly as by the
// SDK, with their data's bytes as written; and Encode now writes each of them as it wrote
// it then except the data member: "data_base64":"<base64>" becomes "data":<the bytes>.
func TestEncodeKeepsStoredBodies(t *testing.T) {
	n := 0
	eachRecordedBody(t, func(file string, i int, old []byte) {
		b64 := oldData.FindSubmatch(old)
		if b64 == nil {
			t.Fatalf("%s:%d: a stored body without data_base64: %s", file, i+1, old)
		}
		data, err := base64.StdEncoding.DecodeString(string(b64[1]))
		if err != nil {
			t.Fatal(err)
		}
		e, err := scanEnvelope(old)
		if err != nil {
			t.Fatalf("%s:%d: the fast path refuses a stored body: %v\n%s", file, i+1, err, old)
		}
		sdk, err := decodeSDK(old)
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(sdk, e); d != "" {
			t.Fatalf("%s:%d: decoders differ (-SDK +fast):\n%s", file, i+1, d)
		}
		if !bytes.Equal(e.Data, data) {
			t.Fatalf("%s:%d: data decoded as %s, stored %s", file, i+1, e.Data, data)
		}
		if _, ok := e.appendEnvelope(nil); !ok {
			t.Fatalf("%s:%d: the direct writer leaves a stored event to the SDK:\n%s", file, i+1, old)
		}
		again, err := e.Encode()
		if err != nil {
			t.Fatal(err)
		}
		want := old
		if jsonData(data) {
			want = bytes.Replace(old, b64[0], append([]byte(`"data":`), data...), 1)
		}
		if !bytes.Equal(again, want) {
			t.Fatalf("%s:%d: re-encoded\n%s\nwant\n%s", file, i+1, again, want)
		}
		n++
	})
	if n < 100 {
		t.Fatalf("only %d stored bodies in the fixtures", n)
	}
}

// eachRecordedBody calls fn with each stored event body of the recorded replay fixtures,
// with its file and line index.
func eachRecordedBody(t *testing.T, fn func(file string, i int, body []byte)) {
	t.Helper()
	files, err := filepath.Glob("testdata/replay/v1/*.jsonl")
	if err != nil || len(files) == 0 {
		t.Fatalf("no replay fixtures (%v)", err)
	}
	for _, file := range files {
		raw, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range bytes.Split(bytes.TrimSpace(raw), []byte("\n")) {
			var msg struct {
				Event json.RawMessage `json:"event"`
			}
			if err := json.Unmarshal(line, &msg); err != nil {
				t.Fatalf("%s:%d: %v", file, i+1, err)
			}
			fn(file, i, msg.Event)
		}
	}
}

// oldData is the data member of a body as Encode wrote it before: base64 in a string.
var oldData = regexp.MustCompile(`"data_base64":"([A-Za-z0-9+/=]*)"`)

// Encode writes an object or array as the data member, byte for byte, and data any
// decoder would read back otherwise (a bare value, blanks around it, nesting deeper than
// the SDK reads in a body) in data_base64; both decoders give the data back as it was.
func TestEncodeWritesJSONData(t *testing.T) {
	deep := func(n int) []byte {
		return []byte(strings.Repeat("[", n) + strings.Repeat("]", n))
	}
	for _, c := range []struct {
		data   []byte
		asJSON bool
	}{
		{[]byte(`{"a":"b\u00e9\"}","n":[1,2.5e3,null,true,{}],"s":"\u2028<&>"}`), true},
		{[]byte("{\"raw\":\"\xff\xfe é\"}"), true}, // not UTF-8 inside a string: JSON takes any byte from 0x20
		{[]byte(`[]`), true},
		{[]byte(`{ "spaced" : [ 1 , 2 ] }`), true},
		{deep(maxDataDepth), true},
		{deep(maxDataDepth + 1), false},
		{[]byte(` [ ] `), false},
		{[]byte("{}\n"), false},
		{[]byte(`"s"`), false},
		{[]byte(`12`), false},
		{[]byte(`null`), false},
	} {
		e := encodeCase(NewID(), "gridwire/test/h", "J1", "alice", "", "", "", c.data, 0, 0, 1)
		body := sameAsSDK(t, e)
		name := string(c.data)
		if len(name) > 40 {
			name = name[:40]
		}
		wantMember := append([]byte(`,"data":`), c.data...)
		if !c.asJSON {
			wantMember = []byte(`,"data_base64":"` + base64.StdEncoding.EncodeToString(c.data) + `"`)
		}
		if !bytes.Contains(body, wantMember) || bytes.Count(body, []byte(`"data":`))+bytes.Count(body, []byte(`"data_base64":`)) != 1 {
			t.Fatalf("%s: want the member %.60s in\n%.300s", name, wantMember, body)
		}
		sdk, err := decodeSDK(body)
		if err != nil || !bytes.Equal(sdk.Data, c.data) {
			t.Fatalf("%s: the SDK reads data %.60q (%v)", name, sdk.Data, err)
		}
		got, err := Decode(body)
		if err != nil || !bytes.Equal(got.Data, c.data) || got.Hash != HashOf(body) {
			t.Fatalf("%s: Decode reads data %.60q (%v)", name, got.Data, err)
		}
		if _, err := scanEnvelope(body); err != nil {
			t.Fatalf("%s: the fast path leaves a body Encode wrote to the SDK", name)
		}
	}
}

// FuzzEncode: whatever the attributes, Encode writes what the SDK writes, and both
// decoders read back the data exactly as given.
func FuzzEncode(f *testing.F) {
	f.Add("01JDJ7Q1ZQ3S2K2B9Y4N3Y8W5A", "gridwire/ingest/h", "J1", "alice", "ab", "U1", "sig", []byte(`{"a":1}`), uint64(3), int64(5), 0)
	f.Add(" x", "a b", "J", "\"\\\n\x01é\u2028", "", "", "", []byte(``), uint64(0), int64(0), 4)
	f.Add("x", "s", "J", "", "", "", "", []byte(` {"a":[1,{"b":"\\\""}]}`), uint64(0), int64(0), 2)
	f.Fuzz(func(t *testing.T, id, source, job, principal, prevhash, signer, signature string, data []byte, prevseq uint64, nanos int64, name int) {
		if name < 0 {
			name = -name
		}
		body := sameAsSDK(t, encodeCase(id, source, job, principal, prevhash, signer, signature, data, prevseq, nanos, name&0xffff))
		if body == nil {
			return
		}
		if len(data) == 0 {
			data = []byte(`{}`)
		}
		sdk, err := decodeSDK(body)
		if err != nil {
			t.Fatalf("the SDK refuses what Encode wrote (%v):\n%s", err, body)
		}
		got, err := Decode(body)
		if err != nil || !bytes.Equal(got.Data, data) || !bytes.Equal(sdk.Data, data) {
			t.Fatalf("data %q read back as %q by Decode (%v), %q by the SDK:\n%s", data, got.Data, err, sdk.Data, body)
		}
	})
}

// BenchmarkEncodeJob encodes a submitted event of a DDS instance's size (about 1.2 KB of
// job) directly and with the SDK, the yardstick; and decodes its body (with its hash), as
// Encode writes it and as it wrote it before (data in base64).
func BenchmarkEncodeJob(b *testing.B) {
	j := Job{ID: NewID(), Name: "main/workers_7/chain_7/processor_14", Parent: NewID(), Submitter: "bench",
		Executable: "/opt/bin/processor", Arguments: []string{"--id", "14"}, Substitutions: []string{"session", "dds_location"},
		Original: Original{Format: "dds", File: "big.xml", SHA256: strings.Repeat("ab", 32), Index: 29, Path: "main/workers_7/chain_7/processor_14"},
		DDS: &DDSContext{Topology: "big", TaskPath: "main/workers_7/chain_7/processor_14", TaskID: "1234567890123456789", TaskIndex: 14,
			CollectionIndex: 7, TaskName: "processor", GroupName: "workers", CollectionName: "chain", CollectionPath: "main/workers_7/chain_7",
			Exe: "/opt/bin/processor --id 14", ExeReachable: true, Properties: []DDSProperty{{Name: "port", Access: "read"}}}}
	for _, kv := range [][2]string{{"DDS_TASK_PATH", j.Name}, {"DDS_GROUP_NAME", "workers"}, {"DDS_COLLECTION_NAME", "chain"},
		{"DDS_TASK_NAME", "processor"}, {"DDS_TASK_INDEX", "14"}, {"DDS_COLLECTION_INDEX", "7"}, {"DDS_SESSION_ID", "{session}"},
		{"DDS_TASK_ID", "1234567890123456789"}, {"DDS_SLOT_ID", "29"}, {"DDS_LOCATION", "{dds_location}"}} {
		j.Environment = append(j.Environment, EnvVar{Name: kv[0], Value: kv[1]})
	}
	e, err := New(j.ID, Submitted, "", time.Now(), j)
	if err != nil {
		b.Fatal(err)
	}
	e.Source, e.Principal = "gridwire/ingest/host-1", "bench"
	body, err := e.Encode()
	if err != nil {
		b.Fatal(err)
	}
	old := oldSpelling(b, body)
	b.Logf("%d bytes of data, a body of %d bytes (%d with the data in base64)", len(e.Data), len(body), len(old))
	for _, c := range []struct {
		name   string
		encode func() ([]byte, error)
	}{
		{"direct", e.Encode},
		{"validate", func() ([]byte, error) { return nil, e.Validate() }},
		{"json.Valid", func() ([]byte, error) { json.Valid(e.Data); return nil, nil }},
		{"sdk", e.encodeSDK},
		{"decode", func() ([]byte, error) { _, err := Decode(body); return nil, err }},
		{"decode-base64", func() ([]byte, error) { _, err := Decode(old); return nil, err }},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			start := cpuTime()
			for b.Loop() {
				if _, err := c.encode(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64((cpuTime()-start).Nanoseconds())/float64(b.N), "cpu-ns/op")
		})
	}
}

// cpuTime is the CPU time this process has used (user and system, every thread): on a
// shared machine wall time per operation overstates the cost.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
