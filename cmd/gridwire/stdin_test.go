package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// cliIn runs the CLI with stdin as its standard input.
func cliIn(stdin string, args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	status := runStatusIn(context.Background(), args, func(string) string { return "" }, strings.NewReader(stdin), &out, &errb)
	return status, out.String(), errb.String()
}

// A description may come on standard input, named "-" as other tools do: submitted (alone
// or beside files), normalized and rendered, its language told from its content, and
// named <stdin> in every message.
func TestDescriptionsFromStandardInput(t *testing.T) {
	examples := filepath.Join("..", "..", "examples")
	dds, err := os.ReadFile(filepath.Join(examples, "dds-topology.xml"))
	if err != nil {
		t.Fatal(err)
	}
	status, out, errOut := cliIn(string(dds), "normalize", "-")
	var jobs []struct {
		Original struct{ Format, File string } `json:"original"`
	}
	if err := json.Unmarshal([]byte(out), &jobs); status != 0 || err != nil || len(jobs) != 6 ||
		jobs[0].Original.Format != "dds" || jobs[0].Original.File != "<stdin>" {
		t.Errorf("normalize -: %d %v %+v %s", status, err, jobs, errOut)
	}
	if status, out, errOut := cliIn(`{"version":3,"executable":"/bin/true"}`, "render", "-"); status != 0 || !strings.Contains(out, "START") {
		t.Errorf("render -: %d %s %s", status, out, errOut)
	}

	server := serveCLI(t)
	status, out, errOut = cliIn(string(dds), "submit", "--wait", "--server", server, "-")
	if status != 0 || !strings.Contains(out, "(5 children: 5 SUCCEEDED)") {
		t.Errorf("submit --wait -: %d %s %s", status, out, errOut)
	}
	status, out, errOut = cliIn(`{"version":3,"executable":"/bin/true"}`, "submit", "--json", "--server", server,
		filepath.Join(examples, "hello.json"), "-")
	var accepted []struct {
		File string
		Jobs []string
	}
	if err := json.Unmarshal([]byte(out), &accepted); status != 0 || err != nil || len(accepted) != 2 ||
		accepted[1].File != "<stdin>" || len(accepted[1].Jobs) != 1 {
		t.Errorf("submit FILE - in bulk: %d %v %s %s", status, err, out, errOut)
	}
	for _, c := range []struct {
		stdin  string
		args   []string
		status int
		says   string
	}{
		{`{"version":3,"executable":"/bin/true","bogus":1}`, []string{"submit", "--server", server, "-"}, exitInvalid, "<stdin>:1:39: bogus: unknown field"},
		{" \n", []string{"submit", "--server", server, "-"}, exitInvalid, "<stdin>: empty: no description was given on standard input"},
		{"{}", []string{"submit", "--server", server, "-", "-"}, exitUsage, "- (standard input) is given 2 times"},
		{"{}", []string{"normalize", "-", "-"}, exitUsage, "- (standard input) is given 2 times"},
		{"<topology", []string{"normalize", "-"}, exitInvalid, "<stdin>"},
	} {
		status, _, errOut := cliIn(c.stdin, c.args...)
		if status != c.status || !strings.Contains(errOut, c.says) {
			t.Errorf("%v with %q: %d %s, want %d and %q", c.args, c.stdin, status, errOut, c.status, c.says)
		}
	}
}
