package ingest_test

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/gridwire/gridwire/pkg/cluster"
	"github.com/gridwire/gridwire/services/ingest"
)

// docBlock is one fenced code block of a documentation page.
type docBlock struct {
	file string // page, for messages
	line int    // of the opening fence
	info string // the fence's info string, e.g. "json example"
	body string
}

// docBlocks returns every fenced code block of the markdown files under dir.
func docBlocks(t *testing.T, dir string) []docBlock {
	t.Helper()
	var out []docBlock
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".md") {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		out = append(out, fences(path, data)...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func fences(path string, data []byte) []docBlock {
	var out []docBlock
	var cur *docBlock
	var body strings.Builder
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case cur == nil && strings.HasPrefix(line, "```"):
			cur = &docBlock{file: path, line: n, info: strings.TrimSpace(strings.TrimPrefix(line, "```"))}
			body.Reset()
		case cur != nil && strings.TrimSpace(line) == "```":
			cur.body = body.String()
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			body.WriteString(line + "\n")
		}
	}
	return out
}

// Every example description in docs/ parses (or, marked example-invalid, is refused with
// exactly the errors the page shows after it), every config block loads, and every
// language has at least one example.
func TestDocsExamplesParse(t *testing.T) {
	blocks := docBlocks(t, filepath.Join("..", "..", "docs"))
	formats := map[string]int{}
	for i, b := range blocks {
		lang, kind, _ := strings.Cut(b.info, " ")
		where := b.file + ":" + strconv.Itoa(b.line)
		switch kind {
		case "example":
			jobs, err := ingest.Parse("example."+lang, []byte(b.body), ingest.ParseOptions{})
			if err != nil || len(jobs) == 0 {
				t.Errorf("%s: the example does not parse: %v", where, err)
				continue
			}
			formats[jobs[0].Original.Format]++
		case "example-invalid":
			_, err := ingest.Parse("example."+lang, []byte(b.body), ingest.ParseOptions{})
			if err == nil {
				t.Errorf("%s: the invalid example was accepted", where)
				continue
			}
			if i+1 < len(blocks) && blocks[i+1].info == "text error" {
				if got, want := strings.TrimSpace(err.Error()), strings.TrimSpace(blocks[i+1].body); got != want {
					t.Errorf("%s: the page shows\n%s\nbut the parser says\n%s", where, want, got)
				}
			}
		case "config":
			if _, err := cluster.Parse("config.yaml", []byte(b.body)); err != nil {
				t.Errorf("%s: the config does not load: %v", where, err)
			}
		}
	}
	for _, f := range []string{ingest.FormatV3JSON, ingest.FormatV3YAML, ingest.FormatJRDL, ingest.FormatDDS, ingest.FormatJSDL} {
		if formats[f] == 0 {
			t.Errorf("docs/ has no example in %s", f)
		}
	}
}

// Every description in examples/ parses, and every cluster config there loads.
func TestExamplesDirectoryParses(t *testing.T) {
	dir := filepath.Join("..", "..", "examples")
	docs, _ := filepath.Glob(filepath.Join(dir, "*.*"))
	if len(docs) == 0 {
		t.Fatal("no examples")
	}
	for _, p := range docs {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if jobs, err := ingest.Parse(filepath.Base(p), data, ingest.ParseOptions{}); err != nil || len(jobs) == 0 {
			t.Errorf("%s: %v", p, err)
		}
	}
	configs, _ := filepath.Glob(filepath.Join(dir, "clusters", "*.yaml"))
	for _, p := range configs {
		if _, err := cluster.Load(p); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
}
