package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// Every description language has an example in examples/, each reads cleanly, and each
// runs to success on the default local cluster, as the README says.
func TestExamplesRun(t *testing.T) {
	docs, _ := filepath.Glob(filepath.Join("..", "..", "examples", "*.*"))
	formats := map[string]bool{}
	for _, doc := range docs {
		status, out, errOut := cli(context.Background(), "normalize", doc)
		var jobs []struct {
			Original struct{ Format string } `json:"original"`
		}
		if err := json.Unmarshal([]byte(out), &jobs); status != 0 || err != nil || len(jobs) == 0 {
			t.Fatalf("normalize %s: %d %v %s", doc, status, err, errOut)
		}
		formats[jobs[0].Original.Format] = true
	}
	for _, f := range []string{"v3-json", "v3-yaml", "jrdl", "dds", "jsdl"} {
		if !formats[f] {
			t.Errorf("no example in %s (have %v)", f, formats)
		}
	}
	server := serveCLI(t)
	status, out, errOut := cli(context.Background(), append([]string{"submit", "--wait", "--server", server}, docs...)...)
	if status != 0 || strings.Contains(out, "FAILED") {
		t.Errorf("the examples did not all succeed: %d\n%s%s", status, out, errOut)
	}
}

// The example cluster configs (fork, SSH, Slurm) load, and a job renders for each.
func TestExampleClusterConfigs(t *testing.T) {
	configs, _ := filepath.Glob(filepath.Join("..", "..", "examples", "clusters", "*.yaml"))
	if len(configs) < 3 {
		t.Fatalf("example configs: %v", configs)
	}
	for _, cfg := range configs {
		status, out, errOut := cli(context.Background(), "render", "--config", cfg, filepath.Join("..", "..", "examples", "hello.json"))
		if status != 0 || !strings.Contains(out, "START") {
			t.Errorf("render with %s: %d\n%s%s", cfg, status, out, errOut)
		}
	}
}
