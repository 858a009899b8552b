package ingest

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gridwire/gridwire/events"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// TestGolden parses every input under testdata/{v3,jrdl,dds} with format detection and
// compares the canonical jobs (or the exact error text) with the file's .golden twin.
// Original.Bytes is left out of the golden JSON; TestOriginalKept checks it.
func TestGolden(t *testing.T) {
	inputs, err := filepath.Glob("testdata/*/*")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, in := range inputs {
		if strings.HasSuffix(in, ".golden") || strings.Contains(in, "/fuzz/") {
			continue
		}
		n++
		t.Run(in, func(t *testing.T) {
			data, err := os.ReadFile(in)
			if err != nil {
				t.Fatal(err)
			}
			got := render(t, in, data)
			golden := in + ".golden"
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test -run TestGolden -update)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("output differs from %s:\n%s", golden, diffLines(string(want), string(got)))
			}
		})
	}
	if n < 20 {
		t.Fatalf("only %d golden inputs found", n)
	}
}

// render is the golden form: the error text, or the jobs as indented JSON.
func render(t *testing.T, name string, data []byte) []byte {
	t.Helper()
	jobs, err := Parse(filepath.Base(name), data, ParseOptions{})
	if err != nil {
		if !errors.Is(err, ErrInvalid) {
			t.Fatalf("error does not wrap ErrInvalid: %v", err)
		}
		if !strings.HasPrefix(filepath.Base(name), "err_") {
			t.Errorf("unexpected error for a valid input:\n%v", err)
		}
		return []byte("ERROR\n" + err.Error() + "\n")
	}
	if strings.HasPrefix(filepath.Base(name), "err_") {
		t.Errorf("an err_ input was accepted")
	}
	for i := range jobs {
		jobs[i].Original.Bytes = nil
	}
	out, err := json.MarshalIndent(jobs, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return append(out, '\n')
}

// diffLines shows the first lines that differ, enough to see what changed.
func diffLines(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	shown := 0
	for i := 0; i < len(w) || i < len(g); i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			b.WriteString("line " + itoa(i+1) + ":\n  want: " + wl + "\n  got:  " + gl + "\n")
			if shown++; shown == 10 {
				break
			}
		}
	}
	return b.String()
}

func itoa(n int) string { return jsonInt(n) }

func jsonInt(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

func TestOriginalKept(t *testing.T) {
	data, err := os.ReadFile("testdata/dds/spec_example.xml")
	if err != nil {
		t.Fatal(err)
	}
	jobs, err := Parse("topo.xml", data, ParseOptions{ContentType: "application/xml"})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(jobs[0].Original.Bytes, data) || jobs[0].Kind != events.KindGroup {
		t.Fatal("the parent record does not hold the original bytes")
	}
	for i, j := range jobs[1:] {
		if j.Original.Bytes != nil || j.Original.Index != i+1 || j.Original.SHA256 != jobs[0].Original.SHA256 {
			t.Fatalf("child %d: original %+v", i+1, j.Original)
		}
		if j.ID != "" || j.Parent != "" {
			t.Fatalf("child %d has an ID or parent before the caller assigns them", i+1)
		}
	}
	data[0] = 'X'
	if jobs[0].Original.Bytes[0] == 'X' {
		t.Fatal("Original.Bytes aliases the caller's buffer")
	}
}
