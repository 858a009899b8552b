package httpapi

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"

	"github.com/gridwire/gridwire/pkg/cluster"
)

// Permission is one thing a token may do.
type Permission string

// The permissions a token can be given (cluster.Token.Allow).
const (
	PermSubmit  Permission = "submit"  // POST /v1/jobs
	PermRead    Permission = "read"    // every GET of the API
	PermCancel  Permission = "cancel"  // cancel, hold, resume: any other write to a job
	PermPublish Permission = "publish" // POST /v1/events, for the token's sources
	// PermAdmin lets cancel and publish act on every principal's jobs, not only the
	// caller's own and its groups'.
	PermAdmin Permission = "admin"
)

var knownPermissions = []Permission{PermSubmit, PermRead, PermCancel, PermPublish, PermAdmin}

// ErrNoTokens is returned when a server would listen beyond loopback with no tokens.
var ErrNoTokens = errors.New("httpapi: no API tokens configured; only a loopback address may be served")

// Grant is what an authenticated caller may do.
type Grant struct {
	Principal string
	Allow     []Permission
	Sources   []string // CloudEvents sources it may publish events for
	AnySource bool     // may publish for every source (no tokens configured)
	Groups    []string // the principal's groups
	// peers are the principals sharing a group with this one: their jobs are this
	// grant's to act on too.
	peers map[string]bool
	// AnyJob may act on every job: the admin permission, or no tokens configured.
	AnyJob bool
	// token is the bearer token the grant was looked up with, so a service acting for
	// the caller can prove it onwards (Bearer); "" for an open Auth.
	token string
}

// Bearer is the token the grant was looked up with, for a request made on the caller's
// behalf (PTP's submissions to ingest over NATS); "" when no tokens are configured.
func (g Grant) Bearer() string { return g.token }

// MayActOn reports whether the grant may act on (cancel, hold, resume, publish events
// for) a job its owner submitted: its own, a group peer's, or any with admin.
func (g Grant) MayActOn(owner string) bool {
	return g.AnyJob || g.May(PermAdmin) || owner != "" && (owner == g.Principal || g.peers[owner])
}

// ErrNotOwner is the refusal of an action on a job that is neither the caller's nor
// granted to it.
func ErrNotOwner(g Grant, action, jobID, owner string) *Error {
	return Errorf(http.StatusForbidden, "not_owner", "principal %s may not %s job %s: it was submitted by %q, "+
		"who shares no group with %s (tokens[].groups), and the token has no admin permission", g.Principal, action, jobID, owner, g.Principal)
}

// May reports whether the grant includes p.
func (g Grant) May(p Permission) bool { return slices.Contains(g.Allow, p) }

// MaySource reports whether the grant may publish events with the given source.
func (g Grant) MaySource(source string) bool {
	return g.May(PermPublish) && (g.AnySource || slices.Contains(g.Sources, source))
}

// Auth checks bearer tokens against the config's tokens. With none configured it is
// open: every caller is "anonymous" with every permission, and the middleware admits
// loopback callers only.
type Auth struct {
	tokens map[[32]byte]Grant // by SHA-256 of the token, compared in constant time
}

// NewAuth builds an Auth from the config's tokens, refusing empty or repeated tokens,
// missing principals and unknown permissions.
func NewAuth(tokens []cluster.Token) (*Auth, error) {
	a := &Auth{tokens: map[[32]byte]Grant{}}
	var errs []error
	for i, t := range tokens {
		where := fmt.Sprintf("tokens[%d]", i)
		g, err := grantOf(where, t)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		sum := sha256.Sum256([]byte(t.Token))
		if _, dup := a.tokens[sum]; dup {
			errs = append(errs, fmt.Errorf("%s.token: the same token is listed twice", where))
		}
		a.tokens[sum] = g
	}
	a.linkGroups()
	return a, errors.Join(errs...)
}

// linkGroups gives every grant the principals that share one of its groups.
func (a *Auth) linkGroups() {
	members := map[string][]string{} // group -> principals
	for _, g := range a.tokens {
		for _, grp := range g.Groups {
			members[grp] = append(members[grp], g.Principal)
		}
	}
	for k, g := range a.tokens {
		g.peers = map[string]bool{}
		for _, grp := range g.Groups {
			for _, p := range members[grp] {
				g.peers[p] = true
			}
		}
		a.tokens[k] = g
	}
}

func grantOf(where string, t cluster.Token) (Grant, error) {
	switch {
	case len(t.Token) < 16:
		return Grant{}, fmt.Errorf("%s.token: must be at least 16 characters", where)
	case strings.TrimSpace(t.Principal) == "":
		return Grant{}, fmt.Errorf("%s.principal: missing", where)
	}
	g := Grant{Principal: t.Principal, Sources: t.Sources, Groups: t.Groups}
	for j, grp := range t.Groups {
		if strings.TrimSpace(grp) == "" {
			return Grant{}, fmt.Errorf("%s.groups[%d]: empty", where, j)
		}
	}
	for j, p := range t.Allow {
		if !slices.Contains(knownPermissions, Permission(p)) {
			return Grant{}, fmt.Errorf("%s.allow[%d]: %q is not one of submit, read, cancel, publish, admin", where, j, p)
		}
		g.Allow = append(g.Allow, Permission(p))
	}
	if len(t.Sources) > 0 && !g.May(PermPublish) {
		return Grant{}, fmt.Errorf("%s.sources: given without the publish permission", where)
	}
	return g, nil
}

// Open reports whether no tokens are configured.
func (a *Auth) Open() bool { return a == nil || len(a.tokens) == 0 }

// openGrant is the grant of every caller of an open Auth.
var openGrant = Grant{Principal: "anonymous", Allow: knownPermissions, AnySource: true, AnyJob: true}

// Lookup returns the grant of a token. An open Auth grants everything to anyone.
func (a *Auth) Lookup(token string) (Grant, bool) {
	if a.Open() {
		return openGrant, true
	}
	sum := sha256.Sum256([]byte(token))
	for k, g := range a.tokens {
		if subtle.ConstantTimeCompare(k[:], sum[:]) == 1 {
			g.token = token
			return g, true
		}
	}
	return Grant{}, false
}

// CheckListen refuses a listen address beyond loopback when no tokens are configured.
func (a *Auth) CheckListen(addr string) error {
	if !a.Open() {
		return nil
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("listen address %q: %w", addr, err)
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("%w (%s)", ErrNoTokens, addr)
}

// TaskRoutes prefixes the task-side API: what running tasks call with the credential
// the executor gave them.
const TaskRoutes = "/v1/tasks/self/"

// Required is the permission a request needs: none for the health check and the web
// page's static files, read for any other GET, submit to submit a job or upload its
// input files, publish to publish events, cancel for every other write.
func Required(r *http.Request) Permission {
	p := r.URL.Path
	switch {
	case p == "/healthz" || p == "/" || strings.HasPrefix(p, "/ui/"):
		if r.Method == http.MethodGet || r.Method == http.MethodHead {
			return ""
		}
	case r.Method == http.MethodGet || r.Method == http.MethodHead:
		return PermRead
	case r.Method == http.MethodPost && p == "/v1/jobs",
		r.Method == http.MethodPut && strings.HasPrefix(p, "/v1/uploads/"):
		return PermSubmit // a job, or the input files it will stage in
	case r.Method == http.MethodPost && p == "/v1/events":
		return PermPublish
	}
	return PermCancel
}

// Middleware authenticates every request with a bearer token (the Authorization
// header, or ?access_token= for browsers' EventSource, which cannot set headers),
// checks the permission Required names, and puts the principal and grant in the
// request's context. An open Auth admits only loopback callers.
//
// Requests under TaskRoutes carry a running task's own credential, not an API token:
// they pass with a grant of nothing, and their handler authenticates the task.
func (a *Auth) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, TaskRoutes) {
			task := Grant{Principal: "task"}
			next.ServeHTTP(w, r.WithContext(WithGrant(WithPrincipal(r.Context(), task.Principal), task)))
			return
		}
		g, err := a.authenticate(r)
		if err != nil {
			if err.Status == http.StatusUnauthorized {
				w.Header().Set("WWW-Authenticate", `Bearer realm="gridwire"`)
			}
			WriteError(w, err)
			return
		}
		ctx := WithGrant(WithPrincipal(r.Context(), g.Principal), g)
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

func (a *Auth) authenticate(r *http.Request) (Grant, *Error) {
	need := Required(r)
	if a.Open() {
		if !loopback(r.RemoteAddr) {
			return Grant{}, Errorf(http.StatusForbidden, "loopback_only", "no API tokens are configured: only loopback callers are served")
		}
		return openGrant, nil
	}
	token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		token = r.URL.Query().Get("access_token")
	}
	if token == "" {
		if need == "" {
			return Grant{Principal: "anonymous"}, nil
		}
		return Grant{}, Errorf(http.StatusUnauthorized, "unauthenticated", "Authorization: a bearer token is required")
	}
	g, ok := a.Lookup(token)
	if !ok {
		return Grant{}, Errorf(http.StatusUnauthorized, "bad_token", "Authorization: the bearer token is not known")
	}
	if need != "" && !g.May(need) {
		return Grant{}, Errorf(http.StatusForbidden, "forbidden", "principal %s may not %s", g.Principal, need)
	}
	return g, nil
}

func loopback(remote string) bool {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		host = remote
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

type grantKey struct{}

// WithGrant returns a context carrying the caller's grant.
func WithGrant(ctx context.Context, g Grant) context.Context {
	return context.WithValue(ctx, grantKey{}, g)
}

// GrantFrom returns the grant the middleware stored; without one (no middleware ran,
// as in-process callers), the open grant.
func GrantFrom(ctx context.Context) Grant {
	if g, ok := ctx.Value(grantKey{}).(Grant); ok {
		return g
	}
	return openGrant
}
