//go:build e2e

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

const (
	operatorToken = "operator-token-0123456789"
	readerToken   = "reader-token-0123456789"
)

// submitAs submits files with a token and returns the IDs it printed.
func submitAs(t *testing.T, server, token string, files ...string) []string {
	t.Helper()
	status, out, errOut := cli(context.Background(), append([]string{"submit", "--server", server, "--token", token}, files...)...)
	if status != 0 {
		t.Fatalf("submit %v: %d %s", files, status, errOut)
	}
	return strings.Fields(out)
}

// listedAs waits until the job table lists every one of ids, as the token sees it.
func listedAs(t *testing.T, server, token string, ids ...string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		_, out, _ := cli(context.Background(), "list", "--all", "--json", "--server", server, "--token", token)
		var views []jobView
		_ = json.Unmarshal([]byte(out), &views)
		n := 0
		for _, v := range views {
			if slices.Contains(ids, v.ID) {
				n++
			}
		}
		if n == len(ids) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the job table lists %d of %d jobs", n, len(ids))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (b *browser) count(selector string) int {
	b.t.Helper()
	var n int
	_ = json.Unmarshal(b.eval(fmt.Sprintf("document.querySelectorAll(%q).length", selector)), &n)
	return n
}

// fitsWidth checks that nothing makes the page wider than its viewport.
func (b *browser) fitsWidth(what string, width int) {
	b.t.Helper()
	if got := string(b.eval(fmt.Sprintf("document.documentElement.scrollWidth <= %d", width))); got != "true" {
		b.t.Errorf("%s: the page is wider than the screen (%s > %d)", what, b.eval("document.documentElement.scrollWidth"), width)
	}
}

// A person's way through the web page, in a real browser: the list with its counts,
// a filter by state, a search, a DDS session opened as a tree; a failed job's page with
// its output, timeline and collapsed scripts; a running job held, resumed and cancelled
// from its page by an operator, while a reader sees no such buttons; an unknown job; and
// the same pages on a phone. Screenshots are kept under .artefacts/web.
func TestWebPageClickThrough(t *testing.T) {
	dir := t.TempDir()
	cfg := writeFile(t, dir, "gridwire.yaml", fmt.Sprintf(`tokens:
  - {token: %s, principal: olga, allow: [submit, read, cancel]}
  - {token: %s, principal: rita, allow: [read]}
`, operatorToken, readerToken))
	server := serveCLI(t, "--config", cfg)
	examples := filepath.Join("..", "..", "examples")
	hello := submitAs(t, server, operatorToken, filepath.Join(examples, "hello.json"))[0]
	failing := submitAs(t, server, operatorToken, writeFile(t, dir, "missing-program.json",
		`{"version":3,"description":"a program that is not there","executable":"/no/such/program"}`))[0]
	dds := submitAs(t, server, operatorToken, filepath.Join(examples, "dds-topology.xml"))
	jrdl := submitAs(t, server, operatorToken, filepath.Join(examples, "jrdl-two-jobs.xml"))
	gated := submitAs(t, server, operatorToken, writeFile(t, dir, "gated.json", `{"version":3,"description":"waits for release",
		"executable":"/bin/sh","arguments":["-c","echo working; while [ ! -e release ]; do sleep 0.1; done; echo released"]}`))[0]
	all := append(append([]string{hello, failing, gated}, dds...), jrdl...)
	listedAs(t, server, operatorToken, all...)
	session := dds[0] // the topology's parent record comes first

	b := newBrowser(t)
	b.size(1280, 900, false)
	b.open(server+"/#token="+operatorToken, "#jobs tbody tr[data-job]")
	b.waitUntil(fmt.Sprintf("document.querySelector('tr[data-job=%q]') && document.querySelector('tr[data-job=%q]')", failing, session), "the jobs")
	b.waitUntil(`document.querySelector("button.count.FAILED")`, "a count of failed jobs")
	b.screenshot("01-list")
	if n := b.count(`#jobs tbody tr[data-depth="0"]`); n != 5 {
		t.Errorf("the list shows %d rows, want 5 (hello, failing, gated, the DDS session, the JRDL document)", n)
	}

	b.click("button.count.FAILED")
	b.waitUntil(`[...document.querySelectorAll("#jobs tbody tr[data-job]")].every(r => r.querySelector("td.state").textContent === "FAILED")`, "only failed jobs")
	if b.count(fmt.Sprintf("tr[data-job=%q]", failing)) != 1 {
		t.Errorf("the failed job is not listed under FAILED")
	}
	b.screenshot("02-list-failed")
	b.click(`button.count[data-state=""]`)
	b.waitFor(fmt.Sprintf("tr[data-job=%q]", hello))

	b.click("#search")
	b.typeText("hello from gridwire")
	b.waitUntil(fmt.Sprintf(`document.querySelectorAll("#jobs tbody tr[data-job]").length === 1 && document.querySelector('tr[data-job=%q]')`, hello), "the search to find hello alone")
	b.screenshot("03-list-search")
	b.eval(`(() => { const s = document.getElementById("search"); s.value = ""; s.dispatchEvent(new Event("input")); })()`)
	b.waitFor(fmt.Sprintf("tr[data-job=%q]", session))

	b.click(fmt.Sprintf("tr[data-job=%q] .toggle", session))
	b.waitUntil(`document.querySelectorAll('#jobs tbody tr[data-depth="2"]').length === 5`, "the session's collections and their tasks")
	if got := b.text("#jobs tbody"); !strings.Contains(got, "main/workers/pair_0") || !strings.Contains(got, "main/workers/pair_1/worker_1") {
		t.Errorf("the tree lacks the collections:\n%s", got)
	}
	b.screenshot("04-list-tree")

	// Paging, two jobs a page: the five roots take three pages, there and back.
	b.open(server+"/?limit=2#token="+operatorToken, "#jobs tbody tr[data-job]")
	pageOf := func(want string) {
		b.waitUntil(fmt.Sprintf(`document.getElementById("page-info").textContent.startsWith(%q)`, want), want)
	}
	pageOf("page 1 · 2 shown of 5")
	b.click("#older")
	pageOf("page 2 · 2 shown of 5")
	b.click("#older")
	pageOf("page 3 · 1 shown of 5")
	if got := string(b.eval(`document.getElementById("older").disabled && !document.getElementById("newer").disabled`)); got != "true" {
		t.Errorf("on the last page, older should be off and newer on")
	}
	b.screenshot("05-list-last-page")
	b.click("#newer")
	pageOf("page 2 · 2 shown of 5")
	b.open(server+"/#token="+operatorToken, fmt.Sprintf("tr[data-job=%q]", failing))

	b.click(fmt.Sprintf("tr[data-job=%q] td.id a", failing))
	b.waitUntil(`document.getElementById("job-state").textContent === "FAILED"`, "the failed job's page")
	b.waitUntil(`document.getElementById("job-name").textContent === "a program that is not there"`, "the job's name")
	b.click("#tab-stderr")
	b.waitUntil(`document.getElementById("output").textContent.includes("not found")`, "its standard error")
	b.waitUntil(`document.querySelectorAll("#phases .phase").length >= 3`, "the phases")
	if got := string(b.eval(`document.querySelectorAll("details.script").length > 0 && [...document.querySelectorAll("details.script")].every(d => !d.open)`)); got != "true" {
		t.Errorf("the scripts are not shown collapsed")
	}
	if got := string(b.eval(`document.querySelector("#original pre").textContent.includes("/no/such/program") && document.querySelector("#canonical pre").textContent.includes('"executable"')`)); got != "true" {
		t.Errorf("the original and canonical descriptions are missing")
	}
	b.screenshot("06-job-failed")

	b.open(server+"/?job="+gated+"#token="+operatorToken, "#job-summary dt")
	b.waitUntil(`document.getElementById("output").textContent.includes("working")`, "the running job's live output")
	b.eval(`window.confirm = () => true`)
	for _, step := range []struct{ button, state string }{{"hold", "HELD"}, {"resume", "RUNNING"}, {"cancel", "CANCELLED"}} {
		b.click("#action-" + step.button)
		b.waitUntil(fmt.Sprintf(`document.getElementById("job-state").textContent === %q`, step.state), step.button+" to take effect")
		if step.state == "HELD" {
			b.screenshot("07-job-held")
		}
	}
	b.waitUntil(`document.querySelectorAll("#attempts tbody tr").length === 1`, "the attempt")
	b.screenshot("08-job-cancelled")

	b.open(server+"/?job="+hello+"#token="+readerToken, "#job-summary dt")
	b.waitUntil(`document.getElementById("whoami").textContent === "rita"`, "the reader's name")
	if n := b.count("#actions button"); n != 0 {
		t.Errorf("a reader sees %d action buttons", n)
	}
	b.waitUntil(`document.getElementById("output").textContent.includes("hello, world")`, "hello's output")
	b.screenshot("09-job-reader")

	// A session's page lists its tasks in the topology's order, and follows them: a
	// topology update that removes two moves them under a row of their own as they end.
	b.open(server+"/?job="+session+"#token="+operatorToken, "#children tbody tr[data-job]")
	b.waitUntil(`document.querySelectorAll("#children tbody tr[data-job]").length === 5`, "the session's five tasks")
	var order string
	_ = json.Unmarshal(b.eval(`[...document.querySelectorAll("#children tbody tr[data-job] td.name")].map(td => td.textContent).join(" ")`), &order)
	if want := "main/coordinator_0 main/workers/pair_0/worker_0 main/workers/pair_0/worker_1 main/workers/pair_1/worker_0 main/workers/pair_1/worker_1"; order != want {
		t.Errorf("the session's page lists %q, want the topology's order %q", order, want)
	}
	topo := func(name string, n int) string {
		return writeFile(t, dir, name, fmt.Sprintf(`<topology name="sleepers">
  <decltask name="sleeper"><exe>/bin/sleep 600</exe></decltask>
  <main name="main"><group name="g" n="%d"><task>sleeper</task></group></main>
</topology>`, n))
	}
	sleepers := submitAs(t, server, operatorToken, topo("three.xml", 3))
	b.open(server+"/?job="+sleepers[0]+"#token="+operatorToken, "#children tbody tr[data-job]")
	b.waitUntil(`[...document.querySelectorAll("#children tbody tr[data-job] td.state")].filter(td => td.textContent === "RUNNING").length === 3`, "three running tasks")
	if status, _, errOut := cli(context.Background(), "topology", "update", "--server", server, "--token", operatorToken, sleepers[0], topo("one.xml", 1)); status != 0 {
		t.Fatalf("topology update: %d %s", status, errOut)
	}
	b.waitUntil(`(() => {
		const rows = [...document.querySelectorAll("#children tbody tr")];
		const at = rows.findIndex(r => r.textContent.includes("removed by a topology update (2)"));
		return at > 0 && rows.slice(at + 1).filter(r => r.querySelector("td.state") && r.querySelector("td.state").textContent === "CANCELLED").length === 2 &&
			rows.slice(0, at).filter(r => r.querySelector("td.state") && r.querySelector("td.state").textContent === "RUNNING").length === 1;
	})()`, "the two removed tasks apart, cancelled, and one still running")
	b.waitUntil(`document.getElementById("timeline").textContent.includes("2 tasks removed")`, "the update on the timeline")
	b.screenshot("09b-session-updated")
	if status, _, errOut := cli(context.Background(), "cancel", "--server", server, "--token", operatorToken, sleepers[0]); status != 0 {
		t.Fatalf("cancel the session: %d %s", status, errOut)
	}
	b.waitUntil(`document.getElementById("job-state").textContent === "CANCELLED"`, "the session to be cancelled")
	// A JRDL document's job has no name: its page is titled by its place in the document.
	b.open(server+"/?job="+jrdl[1]+"#token="+operatorToken, "#job-summary dt")
	b.waitUntil(`document.getElementById("job-name").textContent === "job[0]"`, "the document's first job named by its place")

	b.open(server+"/?job=01M7YSXJYJGT92HYD6NERX8N0S#token="+operatorToken, "#error:not([hidden])")
	if got := b.text("#error"); !strings.Contains(got, "no job") {
		t.Errorf("an unknown job's page says %q", got)
	}
	if got := b.text("#live"); got == "connecting" || got == "live" {
		t.Errorf("an unknown job's page says %q", got)
	}
	b.screenshot("10-unknown-job")

	b.size(390, 844, true)
	b.open(server+"/#token="+operatorToken, "#jobs tbody tr[data-job]")
	b.waitUntil(`document.querySelector("button.count")`, "the counts")
	b.fitsWidth("the list on a phone", 390)
	b.screenshot("11-phone-list")
	b.open(server+"/?job="+failing+"#token="+operatorToken, "#job-summary dt")
	b.waitUntil(`document.querySelectorAll("#phases .phase").length >= 3`, "the phases")
	b.fitsWidth("a job on a phone", 390)
	b.screenshot("12-phone-job")

	if errs := b.pageErrors(); len(errs) > 0 {
		t.Errorf("the page threw or logged errors:\n%s", strings.Join(errs, "\n"))
	}
}
