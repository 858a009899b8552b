package events

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

// storedMessage is one line of a recorded replay fixture: a message as it was stored.
type storedMessage struct {
	Seq     uint64          `json:"seq"`
	Subject string          `json:"subject"`
	Event   json.RawMessage `json:"event"`
}

// recordedMessages are the messages of every recorded history (testdata/replay/v1).
func recordedMessages(tb testing.TB) []storedMessage {
	paths, err := filepath.Glob(filepath.Join("testdata", "replay", "v1", "*.jsonl"))
	if err != nil || len(paths) == 0 {
		tb.Fatalf("no recorded histories: %v", err)
	}
	var out []storedMessage
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			tb.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		for line := 1; sc.Scan(); line++ {
			var m storedMessage
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
				tb.Fatalf("%s:%d: %v", p, line, err)
			}
			out = append(out, m)
		}
		f.Close()
		if err := sc.Err(); err != nil {
			tb.Fatalf("%s: %v", p, err)
		}
	}
	return out
}

// foldView is what DecodeFold promises of DecodeStored's result: the event without the
// attributes no fold reads.
func foldView(e Event) Event {
	e.Source, e.Principal, e.PrevHash, e.PrevSeq, e.Signer, e.Signature = "", "", "", 0, "", ""
	return e
}

// checkDecodeFold holds DecodeFold to DecodeStored on one message.
func checkDecodeFold(t *testing.T, body []byte, subject string, seq uint64) {
	t.Helper()
	want, wantErr := DecodeStored(body, subject, seq)
	got, checked, err := DecodeFoldJSON(body, subject, seq)
	if (err == nil) != (wantErr == nil) {
		t.Fatalf("DecodeFold: %v, DecodeStored: %v, on %q under %q", err, wantErr, body, subject)
	}
	// A fold may skip, not check, what it does not keep of data the decoder says it
	// checked as JSON.
	if checked && !json.Valid(got.Data) {
		t.Fatalf("DecodeFoldJSON says it checked data that is not JSON: %q", body)
	}
	if d := cmp.Diff(foldView(want), got); d != "" {
		t.Fatalf("DecodeFold differs from DecodeStored (-stored +fold) under %q:\n%s\n%s", subject, d, body)
	}
}

// DecodeFold reads every recorded message, every body Store writes (in both spellings of
// the data) and bodies only the SDK reads as DecodeStored reads them, under their own
// subject and others, and refuses what it refuses.
func TestDecodeFoldMatchesDecodeStored(t *testing.T) {
	recorded := recordedMessages(t)
	for _, m := range recorded {
		checkDecodeFold(t, m.Event, m.Subject, m.Seq)
	}
	id := "01JDJ7Q1ZQ3S2K2B9Y4N3Y8W5A"
	subjects := []string{Subject(id, Started, "c1"), Subject(id, Held, ""), Subject("01OTHERJOB", Held, "c2"),
		"jobs." + id + ".held", "jobs." + id + ".held.c1.x", "jobs." + id + ".held.", "other." + id + ".held.c1", "", "jobs"}
	bodies := [][]byte{recorded[0].Event}
	for _, b := range storeBodies(t) {
		bodies = append(bodies, b, oldSpelling(t, b))
	}
	for _, odd := range [][2]string{
		{"principal", `"a\"b"`},                 // an escape: the SDK's
		{"time", `"2026-01-01T00:00:00+00:00"`}, // not the SDK's own spelling
		{"time", `"2026-02-30T00:00:00Z"`},      // no such day
		{"type", `"dev.gridwire.job.held.v0"`},  // an older version: upcast
		{"type", `"dev.gridwire.job.nosuch.v1"`},
		{"source", `"a b"`},
		{"source", `"gridwire/x?y=%zz"`},
		{"prevseq", `"07"`},
		{"prevseq", `7`},
		{"subject", `""`},
		{"signature", `"s\u00e9"`},
		{"data", `"text"`},
	} {
		bodies = append(bodies, envelopeWith(id, odd[0], odd[1]))
	}
	for _, body := range bodies {
		for i, subject := range subjects {
			checkDecodeFold(t, body, subject, uint64(i+1))
		}
	}
}

// envelopeWith is a held event's body for job id with one attribute's value replaced,
// or added, as written.
func envelopeWith(id, attr, raw string) []byte {
	attrs := [][2]string{{"specversion", `"1.0"`}, {"id", `"x"`}, {"source", `"s"`}, {"type", `"dev.gridwire.job.held.v1"`},
		{"subject", `"` + id + `"`}, {"datacontenttype", `"application/json"`}, {"time", `"2026-01-01T00:00:00Z"`}, {"data", "{}"}}
	found := false
	for i := range attrs {
		if attrs[i][0] == attr {
			attrs[i][1], found = raw, true
		}
	}
	if !found {
		attrs = append(attrs, [2]string{attr, raw})
	}
	b := []byte{'{'}
	for i, a := range attrs {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `"`+a[0]+`":`+a[1]...)
	}
	return append(b, '}')
}

// Every body Store writes now has its data checked as JSON by a fold's decode, and none
// with its data in base64 (the old spelling) has.
func TestDecodeFoldChecksStoreWrittenData(t *testing.T) {
	subject := Subject("01JDJ7Q1ZQ3S2K2B9Y4N3Y8W5A", Started, "c1")
	for _, b := range storeBodies(t) {
		if _, checked, err := DecodeFoldJSON(b, subject, 1); err != nil || !checked {
			t.Errorf("checked %v, %v: %s", checked, err, b)
		}
		if _, checked, err := DecodeFoldJSON(oldSpelling(t, b), subject, 1); err != nil || checked {
			t.Errorf("old spelling: checked %v, %v: %s", checked, err, b)
		}
	}
}

// A fold's decode allocates the event's ID and nothing else (the job ID shares the
// subject's bytes, the data the body's) for a body Store writes.
func TestDecodeFoldAllocatesOnlyTheID(t *testing.T) {
	body := storeBodies(t)[5]
	subject := Subject("01JDJ7Q1ZQ3S2K2B9Y4N3Y8W5A", Started, "c1")
	if n := testing.AllocsPerRun(100, func() {
		if _, err := DecodeFold(body, subject, 1); err != nil {
			t.Fatal(err)
		}
	}); n != 1 {
		t.Fatalf("%v allocations a decode, want 1", n)
	}
}

// FuzzDecodeFold: DecodeFold accepts, refuses and reads every body, under any subject,
// as DecodeStored does (less what no fold reads).
func FuzzDecodeFold(f *testing.F) {
	for _, b := range storeBodies(f) {
		f.Add(b, Subject("01JDJ7Q1ZQ3S2K2B9Y4N3Y8W5A", Started, "c1"))
		f.Add(oldSpelling(f, b), "jobs.X.held._")
	}
	for _, m := range recordedMessages(f)[:40] {
		f.Add([]byte(m.Event), m.Subject)
	}
	f.Fuzz(func(t *testing.T, body []byte, subject string) {
		checkDecodeFold(t, body, subject, 7)
		route, ok := routeOf(subject)
		if want := RouteOfSubject(subject); want != NoRoute && (!ok || route != want) || want == NoRoute && ok && route != NoRoute {
			t.Fatalf("routeOf(%q) = %q %v, RouteOfSubject %q", subject, route, ok, want)
		}
	})
}

// roundTrip is how the decoder read a time before parseTime: time.Parse, in UTC, written
// back byte for byte.
func roundTrip(b []byte) (time.Time, bool) {
	t, err := time.Parse(time.RFC3339Nano, string(b))
	if err != nil || t.Location() != time.UTC || t.Format(time.RFC3339Nano) != string(b) {
		return time.Time{}, false
	}
	return t, true
}

func checkParseTime(t *testing.T, s string) {
	t.Helper()
	want, wantOK := roundTrip([]byte(s))
	got, ok := parseTime([]byte(s))
	if ok != wantOK || got != want {
		t.Fatalf("parseTime(%q) = %v %v, the round trip %v %v", s, got, ok, want, wantOK)
	}
}

// parseTime reads what the round trip reads, to the same instant and location.
func TestParseTimeMatchesRoundTrip(t *testing.T) {
	for _, s := range []string{
		"2026-11-23T10:47:11.360671354Z", "2026-11-23T10:47:11Z", "2026-11-23T10:47:11.5Z", "0000-01-01T00:00:00Z",
		"9999-12-31T23:59:59.999999999Z", "2024-02-29T12:00:00Z", "2023-02-29T12:00:00Z", "2100-02-29T00:00:00Z",
		"2000-02-29T00:00:00Z", "2026-04-31T00:00:00Z", "2026-11-23T24:00:00Z", "2026-11-23T23:60:00Z",
		"2026-11-23T23:59:60Z", "2026-13-01T00:00:00Z", "2026-00-01T00:00:00Z", "2026-01-00T00:00:00Z",
		"2026-11-23T10:47:11.50Z", "2026-11-23T10:47:11.Z", "2026-11-23T10:47:11,5Z", "2026-11-23T10:47:11.1234567891Z",
		"2026-11-23T10:47:11.000000001Z", "2026-11-23t10:47:11Z", "2026-11-23T10:47:11z", "2026-11-23T10:47:11+00:00",
		"2026-11-23 10:47:11Z", "+026-11-23T10:47:11Z", "2026-1-23T10:47:11Z", "2026-11-23T10:47:1Z", "", "Z",
	} {
		checkParseTime(t, s)
	}
	for at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC); at.Year() < 2029; at = at.Add(97*time.Hour + 13*time.Minute + 7*time.Second + 123456789) {
		checkParseTime(t, at.Format(time.RFC3339Nano))
	}
}

// parseTime counts the days to a date itself (daysSinceEpoch, daysIn): every day of
// the years it reads gives the instant time.Date gives, and every day past a month's
// end is refused.
func TestParseTimeEveryDay(t *testing.T) {
	for y := 0; y <= 9999; y++ {
		for m := time.January; m <= time.December; m++ {
			n := time.Date(y, m+1, 0, 0, 0, 0, 0, time.UTC).Day()
			if got := daysIn(m, y); got != n {
				t.Fatalf("daysIn(%v, %d) = %d, want %d", m, y, got, n)
			}
			for d := 1; d <= n; d++ {
				want := time.Date(y, m, d, 23, 59, 58, 0, time.UTC)
				if got, ok := parseTime([]byte(fmt.Sprintf("%04d-%02d-%02dT23:59:58Z", y, m, d))); !ok || got != want {
					t.Fatalf("%04d-%02d-%02d: parseTime = %v %v, want %v", y, m, d, got, ok, want)
				}
			}
		}
	}
}

// FuzzParseTime: parseTime reads what the round trip reads.
func FuzzParseTime(f *testing.F) {
	f.Add("2026-11-23T10:47:11.360671354Z")
	f.Add("2024-02-29T23:59:59Z")
	f.Add("2026-11-23T10:47:11.10Z")
	f.Fuzz(func(t *testing.T, s string) { checkParseTime(t, s) })
}

// scanString reads eight bytes at a time: a quote, a backslash, a control character or a
// byte past ASCII at any place of a long string is seen as a byte-at-a-time scan sees it.
func TestScanStringEveryPlace(t *testing.T) {
	plain := []byte("gridwire/executor/host-1.example.org:4222/x")
	reference := func(b []byte) ([]byte, int, bool) {
		for j := 1; j < len(b); j++ {
			switch c := b[j]; {
			case c == '"':
				return b[1:j], j + 1, utf8.Valid(b[1:j])
			case c == '\\' || c < 0x20:
				return nil, j, false
			}
		}
		return nil, len(b), false
	}
	for at := range plain {
		for _, c := range []byte{'"', '\\', 0, 0x1f, 0x20, 0x7f, 0x80, 0xc3, 0xe9, 0xff} {
			s := append([]byte{'"'}, plain...)
			s[1+at] = c
			for _, body := range [][]byte{s, append(s, '"'), append(append([]byte{}, s...), `","x":1}`...)} {
				want, wantEnd, wantOK := reference(body)
				got, end, err := scanString(body, 0)
				if (err == nil) != wantOK || wantOK && (string(got) != string(want) || end != wantEnd) {
					t.Fatalf("scanString(%q) = %q %d %v, want %q %d %v", body, got, end, err, want, wantEnd, wantOK)
				}
			}
		}
	}
}
