package jrdl

import (
	"testing"
	"time"
)

func TestParseDateTime(t *testing.T) {
	good := map[string]time.Time{
		"2004-10-21T01:10:00.000Z":  time.Date(2004, 10, 21, 1, 10, 0, 0, time.UTC),
		"2004-10-21T01:10:00":       time.Date(2004, 10, 21, 1, 10, 0, 0, time.UTC),
		"2004-10-21T10:10:00+09:00": time.Date(2004, 10, 21, 1, 10, 0, 0, time.UTC),
		"2004-10-21T00:10:00-01:30": time.Date(2004, 10, 21, 1, 40, 0, 0, time.UTC),
		"2004-02-29T23:59:59.5Z":    time.Date(2004, 2, 29, 23, 59, 59, 500_000_000, time.UTC),
		"2004-12-31T24:00:00Z":      time.Date(2005, 1, 1, 0, 0, 0, 0, time.UTC),
	}
	for in, want := range good {
		got, err := ParseDateTime(in)
		if err != nil || !got.Equal(want) {
			t.Errorf("ParseDateTime(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "2004-10-21", "2004-10-21 01:10:00", "2003-02-29T00:00:00Z", "2004-13-01T00:00:00Z",
		"2004-00-01T00:00:00Z", "2004-10-21T25:00:00Z", "2004-10-21T24:00:01Z", "2004-10-21T01:60:00Z",
		"2004-10-21T01:10:60Z", "0000-01-01T00:00:00Z", "2004-10-21T01:10:00+15:00", "2004-10-21T01:10:00.Z",
		"04-10-21T01:10:00Z", "2004-10-21T01:10:00z"} {
		if got, err := ParseDateTime(in); err == nil {
			t.Errorf("ParseDateTime(%q) accepted: %v", in, got)
		}
	}
}

func FuzzParseDateTime(f *testing.F) {
	f.Add("2004-10-21T01:10:00.000Z")
	f.Add("2004-12-31T24:00:00+14:00")
	f.Fuzz(func(t *testing.T, s string) {
		got, err := ParseDateTime(s)
		if err == nil && got.Location() != time.UTC {
			t.Fatalf("%q: not in UTC", s)
		}
	})
}
