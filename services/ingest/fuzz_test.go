package ingest

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/gridwire/gridwire/events"
)

// The fuzz targets call parseAs, which has no recover: a panic anywhere in a reader is a
// crash the fuzzer keeps under testdata/fuzz/. Each is seeded with the spec examples,
// the corpus and every golden input of its language.

func seed(f *testing.F, patterns ...string) {
	for _, p := range patterns {
		names, err := filepath.Glob(p)
		if err != nil {
			f.Fatal(err)
		}
		for _, n := range names {
			if fi, err := os.Stat(n); err == nil && fi.Mode().IsRegular() && filepath.Ext(n) != ".golden" {
				f.Add(mustRead(f, n))
			}
		}
	}
}

// checkParse asserts what must hold for any input: no panic, either problems or jobs,
// every problem positioned, and the same answer twice.
func checkParse(t *testing.T, format string, data []byte) {
	jobs, problems := parseAs(format, data)
	if (jobs == nil) == (problems == nil) {
		t.Fatalf("jobs %d and problems %d: exactly one must be set", len(jobs), len(problems))
	}
	for _, p := range problems {
		if p.Line < 1 || p.Col < 1 || p.Field == "" || p.What == "" {
			t.Fatalf("problem without position, field or text: %+v", p)
		}
	}
	if len(jobs) > 1 && jobs[0].Kind != events.KindGroup {
		t.Fatal("several jobs without a parent record first")
	}
	again, _ := parseAs(format, data)
	if !reflect.DeepEqual(jobs, again) {
		t.Fatal("two parses of the same input differ")
	}
}

func FuzzParseV3JSON(f *testing.F) {
	seed(f, "testdata/v3/*.json")
	f.Fuzz(func(t *testing.T, data []byte) { checkParse(t, FormatV3JSON, data) })
}

func FuzzParseV3YAML(f *testing.F) {
	seed(f, "testdata/v3/*.yaml", "testdata/v3/*.json")
	f.Fuzz(func(t *testing.T, data []byte) { checkParse(t, FormatV3YAML, data) })
}

func FuzzParseJRDL(f *testing.F) {
	seed(f, "testdata/jrdl/*.xml")
	f.Fuzz(func(t *testing.T, data []byte) { checkParse(t, FormatJRDL, data) })
}

func FuzzParseDDS(f *testing.F) {
	seed(f, "testdata/dds/*.xml", "/work/shared/corpus/dds/*.xml")
	f.Fuzz(func(t *testing.T, data []byte) { checkParse(t, FormatDDS, data) })
}

// FuzzParseJSDL is seeded with the golden inputs and examples/jsdl-*.xml, which follow
// the documents of GFD.56 (section 7), GFD.111 and GFD.115.
func FuzzParseJSDL(f *testing.F) {
	seed(f, "testdata/jsdl/*.xml", "../../examples/jsdl-*.xml")
	f.Fuzz(func(t *testing.T, data []byte) { checkParse(t, FormatJSDL, data) })
}

// FuzzDetect: detection never panics and names a known format or wraps ErrUnknownFormat.
func FuzzDetect(f *testing.F) {
	seed(f, "testdata/*/*")
	f.Fuzz(func(t *testing.T, data []byte) {
		format, err := Detect(data, "")
		if err != nil {
			if !errors.Is(err, ErrUnknownFormat) {
				t.Fatalf("error not wrapping ErrUnknownFormat: %v", err)
			}
			return
		}
		for _, known := range Formats {
			if format == known {
				return
			}
		}
		t.Fatalf("unknown format name %q", format)
	})
}
