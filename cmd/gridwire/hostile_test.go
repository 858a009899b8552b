package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/pkg/cluster"
	"github.com/gridwire/gridwire/pkg/shellquote"
	"github.com/gridwire/gridwire/services/incarnator"
	"github.com/gridwire/gridwire/services/ingest"
	"golang.org/x/sync/errgroup"
)

// hostileBase are values that, read as shell code by any step, would create a file
// named PWNED or change the words the program receives; and values the description
// languages themselves could misread (markup, quotes, control characters, NUL).
var hostileBase = []string{
	"$(touch PWNED)", "`touch PWNED`", "'; touch PWNED; '", `"; touch PWNED; "`, "a\ntouch PWNED", "\ntouch PWNED\n",
	"; touch PWNED", "| touch PWNED", "&& touch PWNED", "|| touch PWNED", "> PWNED", ">> PWNED", "< /etc/passwd",
	`"$(touch PWNED)"`, `'$(touch PWNED)'`, `\'$(touch PWNED)\'`, `'"'"'$(touch PWNED)`, `\`, `\\`, `'`, `"`, `'\''`,
	"*", "?", "[a-z]*", ".*", "/*", "~", "~root", "-rf", "--help", "-", "--", "-n", "-e", "$HOME", "${IFS}", "$IFS",
	"$((1+1))", "${x:=PWNED}", "$0", "$@", "$*", "$$", "!!", "#not a comment", "a=b", "PWNED=1", "%s%n%x",
	"a b\tc", " ", "\r\n", "\x01\x1b[31m\x7f", "é ü 日本", "$'\\x41'", "}", "{a,b}", "(", ")", "&", ";", "|",
	"<<EOF", "\nEOF\ntouch PWNED\n", "a\\\ntouch PWNED", "$(touch $GW_WORKDIR/PWNED)", "`touch $HOME/PWNED`",
	"<ARGUMENTS>", "<EXECUTABLE>", "]]>", "<!--", "-->", "&amp;", "&#0;", "<x/>", "a\x00touch PWNED", "\x00",
	"\u2028", "\ufeff", "\u00a0", "$(</etc/passwd)", "${PWNED?}", "a;b", "a&b", "a|b", "$((PWNED=1))", "eval touch PWNED",
}

// hostileCorpus is every base value in several positions of a word.
func hostileCorpus() []string {
	var out []string
	for _, v := range hostileBase {
		out = append(out, v, "x"+v, v+"x", "'"+v, v+`"`, "-"+v, v+" "+v)
	}
	return out
}

// printargs writes its $0 and arguments to stdout and its environment to stderr, each
// NUL terminated.
const printargs = "#!/bin/sh\nprintf '%s\\0' \"$0\"\nfor a in \"$@\"; do printf '%s\\0' \"$a\"; done\nenv -0 >&2\n"

// language writes one document in a description language: a job running exe with the
// arguments and the environment given.
type language struct {
	format string
	doc    func(exe string, args []string, env [][2]string) string
}

func jsonString(s string) string { b, _ := json.Marshal(s); return string(b) }

// xmlText escapes markup and keeps whitespace as character references; any other byte
// goes in as it is, so a value XML cannot carry (a control character, NUL) reaches the
// parser, which must refuse it, instead of being replaced on the way (xml.EscapeText
// writes U+FFFD for those).
func xmlText(s string) string {
	r := strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&#34;", "'", "&#39;",
		"\t", "&#x9;", "\n", "&#xA;", "\r", "&#xD;")
	return r.Replace(s)
}

func v3Doc(exe string, args []string, env [][2]string) string {
	var a, e []string
	for _, v := range args {
		a = append(a, jsonString(v))
	}
	for _, kv := range env {
		e = append(e, jsonString(kv[0])+": "+jsonString(kv[1]))
	}
	return `{"version": 3, "executable": ` + jsonString(exe) + `, "arguments": [` + strings.Join(a, ", ") +
		`], "environment": {` + strings.Join(e, ", ") + `}}`
}

func jrdlDoc(exe string, args []string, env [][2]string) string {
	var b strings.Builder
	b.WriteString(`<jrdl><job><executable><path><stringElement value="` + xmlText(exe) + `"/></path></executable>`)
	if len(args) > 0 {
		b.WriteString("<arguments><stringArray>")
		for _, v := range args {
			b.WriteString(`<string><stringElement value="` + xmlText(v) + `"/></string>`)
		}
		b.WriteString("</stringArray></arguments>")
	}
	if len(env) > 0 {
		b.WriteString("<environment><hashtable>")
		for _, kv := range env {
			b.WriteString(`<entry name="` + xmlText(kv[0]) + `"><stringElement value="` + xmlText(kv[1]) + `"/></entry>`)
		}
		b.WriteString("</hashtable></environment>")
	}
	b.WriteString("</job></jrdl>")
	return b.String()
}

func ddsDoc(exe string, args []string, _ [][2]string) string {
	words := []string{shellquote.Quote(exe)}
	for _, v := range args {
		words = append(words, shellquote.Quote(v))
	}
	return `<topology name="t"><decltask name="k"><exe>` + xmlText(strings.Join(words, " ")) + `</exe></decltask><main name="main"><task>k</task></main></topology>`
}

var languages = []language{
	{ingest.FormatV3JSON, v3Doc}, {ingest.FormatV3YAML, v3Doc}, {ingest.FormatJRDL, jrdlDoc}, {ingest.FormatDDS, ddsDoc},
}

// hostileRunner parses documents as ingest does at submission, plans them on a fork
// cluster as the incarnator does, and runs their JOB scripts with /bin/sh.
type hostileRunner struct {
	t       *testing.T
	svc     *ingest.Service
	planner *incarnator.ProfilePlanner
	root    string
}

func newHostileRunner(t *testing.T) *hostileRunner {
	svc, err := ingest.New(ingest.Config{}, ingest.Deps{Store: nopStore{}, Check: vetJob})
	if err != nil {
		t.Fatal(err)
	}
	profiles, err := incarnator.LoadProfiles("")
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	planner, err := incarnator.NewPlanner(cluster.Default(), profiles, root)
	if err != nil {
		t.Fatal(err)
	}
	return &hostileRunner{t: t, svc: svc, planner: planner, root: root}
}

// parse reads a document as ingest does at submission and plans its job as the
// incarnator does: the job's plan, or the refusal.
func (h *hostileRunner) parse(format, doc string) (events.IncarnatedData, error) {
	jobs, err := h.svc.Parse(ingest.Submission{File: "hostile", Data: []byte(doc), Format: format})
	if err != nil {
		return events.IncarnatedData{}, err
	}
	job := jobs[len(jobs)-1] // a DDS topology's one instance follows its parent record
	job.ID = events.NewID()
	return h.planner.Plan(job)
}

// run returns the program's argv and environment, or the refusal.
func (h *hostileRunner) run(format, doc string) (argv, env []string, err error) {
	inc, err := h.parse(format, doc)
	if err != nil {
		return nil, nil, err
	}
	script := filepath.Join(inc.WorkDir, events.ScriptFile)
	werr := os.MkdirAll(filepath.Join(inc.WorkDir, events.ControlDir), 0o700)
	if werr == nil {
		werr = os.WriteFile(script, []byte(inc.Scripts[events.ScriptJob].Body), 0o700)
	}
	if werr != nil {
		h.t.Errorf("writing the job script: %v", werr) // from the runners' goroutines: no Fatal
		return nil, nil, nil
	}
	cmd := exec.Command("/bin/sh", script)
	cmd.Dir, cmd.Env = inc.WorkDir, []string{"PATH=/usr/bin:/bin"}
	_ = cmd.Run() // a program that cannot be executed is the job's failure, not the test's
	stdout, _ := os.ReadFile(filepath.Join(inc.WorkDir, events.StdoutFile))
	stderr, _ := os.ReadFile(filepath.Join(inc.WorkDir, events.StderrFile))
	return splitNUL(stdout), splitNUL(stderr), nil
}

func splitNUL(b []byte) []string {
	if len(b) == 0 {
		return nil
	}
	s := strings.Split(string(b), "\x00")
	return s[:len(s)-1]
}

// nopStore is a store that is never reached: the runner only parses.
type nopStore struct{}

func (nopStore) Create(context.Context, events.Event) (uint64, error) { return 0, nil }

// TestHostileCorpusThroughEveryLanguage sends every hostile value through every field of
// every description language that reaches a rendered script (the executable, each
// argument, each environment value; DDS's exe line, quoted) and runs the scripts: no
// value may ever run as code (the canary PWNED is never created), and each either
// arrives byte-identical in the program's argv or environment, or is refused at
// submission or planning. The counts are printed.
func TestHostileCorpusThroughEveryLanguage(t *testing.T) {
	h := newHostileRunner(t)
	bin := t.TempDir()
	prog := filepath.Join(bin, "printargs")
	if err := os.WriteFile(prog, []byte(printargs), 0o755); err != nil {
		t.Fatal(err)
	}
	corpus := hostileCorpus()
	var tried, refused, accepted, leaked, changed int
	tally := func(what string, err error, ok bool) {
		tried++
		switch {
		case err != nil:
			refused++
		case ok:
			accepted++
		default:
			changed++
			t.Errorf("%s: neither refused nor byte-identical", what)
		}
	}
	for _, lang := range languages {
		// Arguments and environment values: each value alone is parsed (and refused or
		// not); those accepted then run together in one job, each compared to its own.
		var args []string
		for _, v := range corpus {
			if _, err := h.parse(lang.format, lang.doc(prog, []string{v}, nil)); err != nil {
				tally(lang.format+" argument", err, false)
				continue
			}
			args = append(args, v)
		}
		if len(args) < len(corpus)/2 {
			t.Fatalf("%s: only %d of %d arguments accepted; the documents are wrong, not the values", lang.format, len(args), len(corpus))
		}
		argv, _, err := h.run(lang.format, lang.doc(prog, args, nil))
		if err != nil {
			t.Fatalf("%s: the accepted arguments together: %v", lang.format, err)
		}
		for i, v := range args {
			tally(fmt.Sprintf("%s argument %q", lang.format, v), nil, i+1 < len(argv) && argv[i+1] == v)
		}
		if lang.format != ingest.FormatDDS { // a DDS task's environment is a script it names
			var env [][2]string
			for i, v := range corpus {
				kv := [2]string{fmt.Sprintf("H%d", i), v}
				if _, err := h.parse(lang.format, lang.doc(prog, nil, [][2]string{kv})); err != nil {
					tally(lang.format+" environment", err, false)
					continue
				}
				env = append(env, kv)
			}
			if len(env) < len(corpus)/2 {
				t.Fatalf("%s: only %d of %d values accepted; the documents are wrong, not the values", lang.format, len(env), len(corpus))
			}
			_, envOut, err := h.run(lang.format, lang.doc(prog, nil, env))
			if err != nil {
				t.Fatalf("%s: the accepted environment together: %v", lang.format, err)
			}
			for _, kv := range env {
				tally(fmt.Sprintf("%s environment %q", lang.format, kv[1]), nil, slices.Contains(envOut, kv[0]+"="+kv[1]))
			}
		}
		// The executable: one job each, a program under the very name where the name can
		// be a file (each in a directory of its own, so names do not collide).
		// Every program is written before any job runs: a file being written while
		// another goroutine forks cannot be executed (ETXTBSY).
		exes := make([]string, len(corpus))
		locals := make([]bool, len(corpus))
		for i, v := range corpus {
			exes[i] = filepath.Join(bin, lang.format, fmt.Sprint(i), v)
			locals[i] = filepath.IsLocal(v) && !strings.ContainsRune(v, 0)
			if locals[i] {
				if err := os.MkdirAll(filepath.Dir(exes[i]), 0o755); err == nil {
					_ = os.WriteFile(exes[i], []byte(printargs), 0o755)
				}
			}
		}
		var mu sync.Mutex
		var g errgroup.Group
		g.SetLimit(4)
		for i, v := range corpus {
			g.Go(func() error {
				exe, local := exes[i], locals[i]
				argv, _, err := h.run(lang.format, lang.doc(exe, nil, nil))
				ok := err == nil && (!local || slices.Equal(argv, []string{exe}))
				mu.Lock()
				defer mu.Unlock()
				tally(fmt.Sprintf("%s executable %q (argv %q)", lang.format, v, argv), err, ok)
				return nil
			})
		}
		_ = g.Wait()
	}
	_ = filepath.WalkDir(h.root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.Contains(d.Name(), "PWNED") {
			leaked++
			t.Errorf("something ran: %s exists", p)
		}
		return nil
	})
	if _, err := os.Stat("PWNED"); err == nil {
		leaked++
		t.Error("something ran: PWNED exists in the test's directory")
	}
	t.Logf("hostile corpus: %d values, tried %d, refused %d, accepted %d, changed %d, leaked %d", len(corpus), tried, refused, accepted, changed, leaked)
	fmt.Printf("hostile corpus: %d values, tried %d, refused %d, accepted %d, changed %d, leaked %d\n", len(corpus), tried, refused, accepted, changed, leaked)
	if len(corpus) < 500 {
		t.Errorf("only %d hostile values", len(corpus))
	}
}
