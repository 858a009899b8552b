package httpapi

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gridwire/gridwire/pkg/cluster"
)

func TestNewAuthNamesBadTokens(t *testing.T) {
	cases := []struct {
		tokens []cluster.Token
		want   string
	}{
		{[]cluster.Token{{Token: "short", Principal: "a", Allow: []string{"read"}}}, "tokens[0].token: must be at least 16"},
		{[]cluster.Token{{Token: "0123456789abcdef", Allow: []string{"read"}}}, "tokens[0].principal: missing"},
		{[]cluster.Token{{Token: "0123456789abcdef", Principal: "a", Allow: []string{"read", "delete"}}}, `tokens[0].allow[1]: "delete"`},
		{[]cluster.Token{{Token: "0123456789abcdef", Principal: "a", Allow: []string{"read"}, Sources: []string{"s"}}}, "tokens[0].sources: given without the publish"},
		{[]cluster.Token{{Token: "0123456789abcdef", Principal: "a"}, {Token: "0123456789abcdef", Principal: "b"}}, "tokens[1].token: the same token is listed twice"},
	}
	for _, c := range cases {
		if _, err := NewAuth(c.tokens); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.tokens, err, c.want)
		}
	}
}

func TestCheckListen(t *testing.T) {
	open, _ := NewAuth(nil)
	closed, _ := NewAuth([]cluster.Token{{Token: "0123456789abcdef", Principal: "a", Allow: []string{"read"}}})
	for addr, ok := range map[string]bool{"127.0.0.1:8080": true, "[::1]:80": true, "localhost:1": true,
		"0.0.0.0:8080": false, ":8080": false, "10.1.2.3:80": false, "[::]:80": false} {
		if err := open.CheckListen(addr); (err == nil) != ok {
			t.Errorf("open auth, %s: %v", addr, err)
		}
		if err := closed.CheckListen(addr); err != nil {
			t.Errorf("with tokens, %s: %v", addr, err)
		}
	}
}

func TestMiddleware(t *testing.T) {
	auth, err := NewAuth([]cluster.Token{
		{Token: "submitter-token-000", Principal: "sam", Allow: []string{"submit", "read"}},
		{Token: "publisher-token-000", Principal: "pub", Allow: []string{"publish"}, Sources: []string{"urn:x"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	var seen Grant
	h := auth.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = GrantFrom(r.Context())
		if PrincipalFrom(r.Context()) != seen.Principal {
			t.Errorf("principal %q, grant %q", PrincipalFrom(r.Context()), seen.Principal)
		}
	}))
	cases := []struct {
		method, target, token string
		want                  int
		principal             string
	}{
		{"GET", "/healthz", "", 200, "anonymous"},
		{"GET", "/", "", 200, "anonymous"},
		{"GET", "/v1/jobs", "", 401, ""},
		{"GET", "/v1/jobs", "submitter-token-000", 200, "sam"},
		{"GET", "/v1/events?access_token=submitter-token-000", "", 200, "sam"},
		{"POST", "/v1/jobs", "submitter-token-000", 200, "sam"},
		{"PUT", "/v1/uploads/in.dat", "submitter-token-000", 200, "sam"},
		{"PUT", "/v1/uploads/in.dat", "publisher-token-000", 403, ""},
		{"POST", "/v1/jobs/X/cancel", "submitter-token-000", 403, ""},
		{"POST", "/v1/events", "submitter-token-000", 403, ""},
		{"POST", "/v1/events", "publisher-token-000", 200, "pub"},
		{"GET", "/v1/jobs", "publisher-token-000", 403, ""},
		{"GET", "/v1/jobs", "nobody-knows-this", 401, ""},
		// The task-side API authenticates tasks itself, and its callers are granted nothing.
		{"PUT", "/v1/tasks/self/properties/peer", "gwt1.x.y", 200, "task"},
		{"GET", "/v1/tasks/self/properties", "", 200, "task"},
	}
	for _, c := range cases {
		seen = Grant{}
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(c.method, c.target, nil)
		req.RemoteAddr = "192.0.2.7:5000"
		if c.token != "" {
			req.Header.Set("Authorization", "Bearer "+c.token)
		}
		h.ServeHTTP(rec, req)
		if rec.Code != c.want || seen.Principal != c.principal {
			t.Errorf("%s %s %q: %d as %q, want %d as %q", c.method, c.target, c.token, rec.Code, seen.Principal, c.want, c.principal)
		}
	}
	seen = Grant{}
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/v1/tasks/self/properties", nil))
	if seen.May(PermRead) || seen.May(PermCancel) || seen.AnyJob {
		t.Errorf("a task-side request was granted %+v", seen)
	}
	if !(Grant{Allow: []Permission{PermPublish}, Sources: []string{"urn:x"}}).MaySource("urn:x") ||
		(Grant{Allow: []Permission{PermPublish}, Sources: []string{"urn:x"}}).MaySource("urn:y") {
		t.Error("MaySource does not follow the grant's sources")
	}
}

// With no tokens, only loopback callers are served, with every permission.
func TestOpenAuthServesLoopbackOnly(t *testing.T) {
	auth, _ := NewAuth(nil)
	h := auth.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !GrantFrom(r.Context()).MaySource("anything") {
			t.Error("the open grant may not publish for every source")
		}
	}))
	for remote, want := range map[string]int{"127.0.0.1:5000": 200, "[::1]:5000": 200, "192.0.2.7:5000": 403} {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("POST", "/v1/events", nil)
		req.RemoteAddr = remote
		h.ServeHTTP(rec, req)
		if rec.Code != want {
			t.Errorf("from %s: %d, want %d", remote, rec.Code, want)
		}
	}
}

// A grant acts on its own principal's jobs, its group peers', and every job with admin
// (or no tokens at all); never on another principal's otherwise.
func TestMayActOn(t *testing.T) {
	auth, err := NewAuth([]cluster.Token{
		{Token: "alice-token-000000", Principal: "alice", Allow: []string{"cancel"}, Groups: []string{"lab"}},
		{Token: "carol-token-000000", Principal: "carol", Allow: []string{"cancel"}, Groups: []string{"lab", "ops"}},
		{Token: "bob-token-00000000", Principal: "bob", Allow: []string{"cancel"}},
		{Token: "admin-token-000000", Principal: "op", Allow: []string{"cancel", "admin"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	grant := func(tok string) Grant { g, _ := auth.Lookup(tok); return g }
	for _, c := range []struct {
		tok, owner string
		ok         bool
	}{
		{"alice-token-000000", "alice", true}, {"alice-token-000000", "carol", true}, {"alice-token-000000", "bob", false},
		{"carol-token-000000", "alice", true}, {"bob-token-00000000", "alice", false}, {"bob-token-00000000", "", false},
		{"admin-token-000000", "alice", true}, {"admin-token-000000", "", true},
	} {
		if got := grant(c.tok).MayActOn(c.owner); got != c.ok {
			t.Errorf("%s on %q's job: %v, want %v", c.tok, c.owner, got, c.ok)
		}
	}
	if open, _ := NewAuth(nil); !GrantFrom(t.Context()).MayActOn("anyone") || !func() bool { g, _ := open.Lookup(""); return g.MayActOn("x") }() {
		t.Error("the open grant must act on every job")
	}
	if _, err := NewAuth([]cluster.Token{{Token: "0123456789abcdef", Principal: "a", Groups: []string{" "}}}); err == nil {
		t.Error("an empty group was accepted")
	}
}
