package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/pkg/httpapi"
	"github.com/oklog/ulid/v2"
)

// matrixToken is one token of the matrix config.
type matrixToken struct {
	name, token, principal string
	allow                  []httpapi.Permission
	source                 string
	groups                 []string
}

func (m matrixToken) may(p httpapi.Permission) bool { return slices.Contains(m.allow, p) }

// mayActOn mirrors the rule under test from the config alone: the owner, a group peer,
// or an admin.
func (m matrixToken) mayActOn(owner string, all []matrixToken) bool {
	if m.may(httpapi.PermAdmin) || owner == m.principal {
		return true
	}
	for _, o := range all {
		if o.principal == owner && len(o.groups) > 0 && slices.ContainsFunc(o.groups, func(g string) bool { return slices.Contains(m.groups, g) }) {
			return true
		}
	}
	return false
}

// TestTokenMatrix runs every token (one per permission alone, the owner, another
// principal, a group peer, an admin, none, an unknown one) against every route of the
// HTTP API and, for the routes about one job, against the token's own job and someone
// else's. Each answer is classed as unauthenticated, forbidden or allowed and compared
// with what the permissions, ownership and groups say; the counts are printed, and
// leaked (a refusal the server did not make) must be 0. The reproduction is one
// cell: a publisher for ext/a posting cancel_requested for another principal's job.
func TestTokenMatrix(t *testing.T) {
	all := []httpapi.Permission{httpapi.PermSubmit, httpapi.PermRead, httpapi.PermCancel, httpapi.PermPublish, httpapi.PermAdmin}
	tokens := []matrixToken{
		{"alice", "alice-token-0000000", "alice", all[:4], "ext/a", []string{"lab"}},
		{"bob", "bob-token-000000000", "bob", all[:4], "ext/b", nil},
		{"carol (alice's group)", "carol-token-0000000", "carol", all[1:4], "ext/c", []string{"lab"}},
		{"operator (admin)", "admin-token-0000000", "operator", all, "ext/op", nil},
	}
	for _, p := range all {
		tokens = append(tokens, matrixToken{"eve " + string(p), "eve-" + string(p) + "-token-0000000", "eve", []httpapi.Permission{p}, "ext/e", nil})
	}
	var cfg strings.Builder
	cfg.WriteString("clusters:\n  - {name: local, kind: fork, profile: fork, lrms: Fork}\ntokens:\n")
	for _, tk := range tokens {
		fmt.Fprintf(&cfg, "  - token: %s\n    principal: %s\n    allow: %q\n", tk.token, tk.principal, tk.allow)
		if tk.may(httpapi.PermPublish) {
			fmt.Fprintf(&cfg, "    sources: [%s]\n", tk.source)
		}
		if len(tk.groups) > 0 {
			fmt.Fprintf(&cfg, "    groups: %q\n", tk.groups)
		}
	}
	conf := filepath.Join(t.TempDir(), "gw.yaml")
	if err := os.WriteFile(conf, []byte(strings.ReplaceAll(cfg.String(), `" "`, `", "`)), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := startServe(t, func(string) string { return "" }, "--config", conf, "--data", t.TempDir())
	base := "http://" + addr
	call := func(tok, method, path, body string) (int, []byte) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, method, base+path, strings.NewReader(body))
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer resp.Body.Close()
		if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
			return resp.StatusCode, nil // a live stream: its status is the answer
		}
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return resp.StatusCode, b
	}
	submit := func(tk matrixToken) string {
		code, body := call(tk.token, "POST", "/v1/jobs", `{"version":3,"executable":"/bin/sleep","arguments":["300"]}`)
		var acc struct{ Jobs []string }
		if code != http.StatusCreated || json.Unmarshal(body, &acc) != nil || len(acc.Jobs) != 1 {
			t.Fatalf("%s submits: %d %s", tk.name, code, body)
		}
		return acc.Jobs[0]
	}
	owner := map[string]string{}
	jobOf := map[string]string{}
	for _, tk := range tokens[:2] { // alice's and bob's jobs
		id := submit(tk)
		owner[id], jobOf[tk.principal] = tk.principal, id
	}
	// The submitter recorded is the authenticated caller.
	for id, who := range owner {
		_, body := call(tokens[0].token, "GET", "/v1/jobs/"+id, "")
		var v struct{ Submitter string }
		if json.Unmarshal(body, &v); v.Submitter != who {
			t.Errorf("job %s: submitter %q, want %q", id, v.Submitter, who)
		}
	}
	// An external submitted event names the job's submitter too: the caller's, not the data's.
	forged := events.NewID()
	code, body := call(tokens[0].token, "POST", "/v1/events", fmt.Sprintf(`{"specversion":"1.0","id":"%s","source":"ext/a","type":"%s","subject":"%s","data":{"id":"%s","submitter":"bob","executable":"/bin/true","original":{}}}`,
		ulid.Make(), events.Submitted.Type(), forged, forged))
	if code != http.StatusCreated {
		t.Fatalf("external submitted: %d %s", code, body)
	}
	_, body = call(tokens[0].token, "GET", "/v1/jobs/"+forged, "")
	var fv struct{ Submitter string }
	if json.Unmarshal(body, &fv); fv.Submitter != "alice" {
		t.Errorf("an external submitted event with submitter bob, posted by alice, recorded submitter %q (%s)", fv.Submitter, body)
	}
	event := func(tk matrixToken, id string) string {
		return fmt.Sprintf(`{"specversion":"1.0","id":"%s","source":"%s","type":"%s","subject":"%s","data":{"reason":"matrix"}}`,
			ulid.Make(), tk.source, events.CancelRequested.Type(), id)
	}
	type route struct {
		method, path string
		job          bool // about one job: asked for the token's own and another's
		body         func(tk matrixToken, id string) string
	}
	routes := []route{
		{"GET", "/healthz", false, nil}, {"GET", "/", false, nil}, {"GET", "/ui/", false, nil},
		{"GET", "/v1/version", false, nil}, {"GET", "/metrics", false, nil}, {"GET", "/v1/jobs", false, nil},
		{"GET", "/v1/events", false, nil}, {"GET", "/v1/jobs/{id}", true, nil}, {"GET", "/v1/jobs/{id}/events", true, nil},
		{"GET", "/v1/jobs/{id}/logs", true, nil},
		{"POST", "/v1/jobs", false, func(matrixToken, string) string { return `{"version":3,"executable":"/bin/true"}` }},
		{"PUT", "/v1/uploads/" + ulid.Make().String() + "/in.dat", false, func(matrixToken, string) string { return "data" }},
		{"POST", "/v1/jobs/{id}/resume", true, nil}, {"POST", "/v1/jobs/{id}/hold", true, nil},
		{"POST", "/v1/events", true, event}, {"POST", "/v1/jobs/{id}/cancel", true, nil},
	}
	callers := append(tokens, matrixToken{name: "no token"}, matrixToken{name: "unknown token", token: "nobody-knows-this-token"})
	var tried, refused, accepted, leaked int
	for _, r := range routes {
		for _, tk := range callers {
			targets := []string{""}
			if r.job {
				own := jobOf[tk.principal]
				if own == "" {
					own = jobOf["alice"] // a principal without a job: both are someone else's
				}
				other := jobOf["bob"]
				if own == other {
					other = jobOf["alice"]
				}
				targets = []string{own, other}
			}
			for _, id := range targets {
				path := strings.ReplaceAll(r.path, "{id}", id)
				body := ""
				if r.body != nil {
					body = r.body(tk, id)
				}
				want := expect(r.method, path, tk, owner[id], tokens)
				code, resp := call(tk.token, r.method, path, body)
				got := class(code, resp)
				tried++
				if got == "allowed" {
					accepted++
				} else {
					refused++
				}
				if got != want {
					if got == "allowed" {
						leaked++
					}
					t.Errorf("%s %s as %s (job of %q): %s (%d %s), want %s", r.method, path, tk.name, owner[id], got, code, resp, want)
				}
			}
		}
	}
	t.Logf("token matrix: tried %d, refused %d, accepted %d, leaked %d", tried, refused, accepted, leaked)
	fmt.Printf("token matrix: tried %d, refused %d, accepted %d, leaked %d\n", tried, refused, accepted, leaked)
}

// expect is what the rules say a caller gets on a route: unauthenticated, forbidden
// (the permission is missing), not_owner (someone else's job) or allowed.
func expect(method, path string, tk matrixToken, owner string, all []matrixToken) string {
	req, _ := http.NewRequest(method, path, nil)
	need := httpapi.Required(req)
	switch {
	case tk.token != "" && tk.principal == "":
		return "unauthenticated" // an unknown token is refused even where none is needed
	case need == "":
		return "allowed"
	case tk.token == "":
		return "unauthenticated"
	case !tk.may(need):
		return "forbidden"
	case need == httpapi.PermCancel || need == httpapi.PermPublish && owner != "":
		if !tk.mayActOn(owner, all) {
			return "not_owner"
		}
	}
	return "allowed"
}

// class sorts an answer: 401, 403 by its code, or anything else (a success, a 404 or a
// 409 is past the authorization checks).
func class(code int, body []byte) string {
	var e struct{ Error struct{ Code string } }
	_ = json.Unmarshal(body, &e)
	switch {
	case code == http.StatusUnauthorized:
		return "unauthenticated"
	case code == http.StatusForbidden && e.Error.Code == "not_owner":
		return "not_owner"
	case code == http.StatusForbidden:
		return "forbidden"
	}
	return "allowed"
}
