package stager

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// testResolver answers from a table, as a hostile DNS server would: names for the
// numeric spellings a libc resolver reads as addresses (127.1, 2130706433, ...), and
// rebinding names whose answer changes from one lookup to the next.
type testResolver struct {
	mu     sync.Mutex
	names  map[string][]string
	rebind map[string][]string // answers in turn, one per lookup
	turns  map[string]int
}

func (r *testResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	answers, ok := r.names[strings.ToLower(host)]
	if seq, rebinds := r.rebind[host]; rebinds {
		answers, ok = []string{seq[r.turns[host]%len(seq)]}, true
		r.turns[host]++
	}
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	var out []netip.Addr
	for _, a := range answers {
		out = append(out, netip.MustParseAddr(a))
	}
	return out, nil
}

// listen starts an HTTP server on addr ("127.0.0.2:0") running h.
func listen(t *testing.T, addr string, h http.Handler) *httptest.Server {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listening on %s: %v", addr, err)
	}
	s := httptest.NewUnstartedServer(h)
	s.Listener.Close()
	s.Listener = ln
	s.Start()
	t.Cleanup(s.Close)
	return s
}

// TestSSRFCorpus fetches every URL of a hostile corpus through the stager's HTTP
// endpoint under the default policy with one site host opened. A canary server stands
// for what jobs must never reach (the gateway's own API on loopback, a private service):
// it counts every request that arrives. Each URL is tried directly, and again as the
// target of a redirect from the opened host; rebinding names change their answer
// between lookups. The counts are printed; leaked must be 0.
func TestSSRFCorpus(t *testing.T) {
	var leaked atomic.Int64
	canary := listen(t, "127.0.0.1:0", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		leaked.Add(1)
		io.WriteString(w, `{"jobs":["the whole job list"]}`)
	}))
	port := canary.Listener.Addr().(*net.TCPAddr).Port
	p := fmt.Sprint(port)
	// The site's storage: an opened address on the canary's port, so a rebinding name
	// needs no port change to switch from one to the other.
	site := listen(t, "127.0.0.2:"+p, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if to := r.URL.Query().Get("to"); to != "" {
			http.Redirect(w, r, to, http.StatusFound)
			return
		}
		io.WriteString(w, "site data")
	}))
	// The gateway's own API, on an opened address: still never reachable.
	own := listen(t, "127.0.0.3:0", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		leaked.Add(1)
	}))
	ownAddr := own.Listener.Addr().String()
	res := &testResolver{
		names: map[string][]string{
			"site.test": {"127.0.0.2"}, "internal.test": {"127.0.0.1"}, "127.1": {"127.0.0.1"},
			"2130706433": {"127.0.0.1"}, "0x7f000001": {"127.0.0.1"}, "017700000001": {"127.0.0.1"},
			"127.000.000.001": {"127.0.0.1"}, "mixed.test": {"10.0.0.1", "127.0.0.1"},
			"v6.test": {"::1"}, "mapped.test": {"::ffff:127.0.0.1"}, "meta.test": {"169.254.169.254"},
			"own.test": {"127.0.0.3"}, "cgnat.test": {"100.100.100.200"}, "ula.test": {"fd00:ec2::254"},
			"localhost": {"127.0.0.1"}, "0": {"0.0.0.0"}, "metadata.google.internal": {"169.254.169.254"},
		},
		rebind: map[string][]string{"rebind.test": {"127.0.0.2", "127.0.0.1"}, "rebind6.test": {"127.0.0.2", "::ffff:127.0.0.1"}},
		turns:  map[string]int{},
	}
	policy := HTTPPolicy{Allow: []string{"127.0.0.2", "127.0.0.3", "site.test"}, Own: []string{ownAddr}}
	h := newHTTPEndpoint(compiled(t, policy), 0, nil, res)

	hostile := []string{
		"http://127.0.0.1:" + p + "/v1/jobs", "http://localhost:" + p + "/v1/jobs", "http://LOCALHOST.:" + p + "/",
		"http://api.localhost:" + p + "/", "http://[::ffff:127.0.0.1]:" + p + "/", "http://[::ffff:7f00:1]:" + p + "/",
		"http://ok@127.0.0.1:" + p + "/", "http://ok:pw@127.0.0.1:" + p + "/", "http://0.0.0.0:" + p + "/",
		"http://[::]:" + p + "/", "http://[::1]:" + p + "/", "http://127.1:" + p + "/", "http://2130706433:" + p + "/",
		"http://0x7f000001:" + p + "/", "http://017700000001:" + p + "/", "http://127.000.000.001:" + p + "/",
		"http://internal.test:" + p + "/", "http://[64:ff9b::7f00:1]:" + p + "/", "http://[2002:7f00:1::1]:" + p + "/",
		"http://[::127.0.0.1]:" + p + "/", "http://mixed.test:" + p + "/", "http://v6.test:" + p + "/",
		"http://mapped.test:" + p + "/", "https://127.0.0.1:" + p + "/", "http://169.254.169.254/latest/meta-data/",
		"http://[fd00:ec2::254]/latest/meta-data/", "http://metadata.google.internal/computeMetadata/v1/",
		"http://metadata/computeMetadata/v1/", "http://meta.test/latest/", "http://100.100.100.200/latest/meta-data/",
		"http://cgnat.test/", "http://ula.test/", "http://10.0.0.1/", "http://172.16.0.1/", "http://192.168.0.1/",
		"http://[fe80::1]/", "http://[fe80::1%25lo]/", "http://[fc00::1]/", "http://100.64.0.1/", "http://224.0.0.1/",
		"http://255.255.255.255/", "http://0/", "http://" + ownAddr + "/v1/jobs", "http://own.test:" + fmt.Sprint(own.Listener.Addr().(*net.TCPAddr).Port) + "/",
		"http://[::ffff:169.254.169.254]/",
	}
	type tc struct {
		url    string
		accept bool // the URL must be fetched; otherwise it must be refused
		either bool // rebinding: each fetch may go either way, never to the canary
	}
	var cases []tc
	for _, u := range hostile {
		cases = append(cases, tc{url: u})
		cases = append(cases, tc{url: site.URL + "/?to=" + url.QueryEscape(u)})
	}
	for _, u := range []string{"file:///etc/passwd", "gopher://127.0.0.1:" + p + "/", "ftp://127.0.0.1/", "sftp://127.0.0.1/etc/shadow"} {
		cases = append(cases, tc{url: site.URL + "/?to=" + url.QueryEscape(u)}) // schemes a redirect may not switch to
	}
	for i := 0; i < 6; i++ {
		cases = append(cases, tc{url: "http://rebind.test:" + p + "/", either: true},
			tc{url: "http://rebind6.test:" + p + "/", either: true},
			tc{url: site.URL + "/?to=" + url.QueryEscape("http://rebind.test:"+p+"/"), either: true})
	}
	cases = append(cases, tc{url: site.URL + "/data", accept: true}, tc{url: "http://site.test:" + p + "/data", accept: true},
		tc{url: site.URL + "/?to=" + url.QueryEscape("http://site.test:"+p+"/x"), accept: true})

	var tried, refused, accepted int
	for _, c := range cases {
		tried++
		h.client.CloseIdleConnections() // every fetch dials anew, so rebinding gets its turn
		r, _, err := h.open(t.Context(), c.url)
		if err == nil {
			body, _ := io.ReadAll(r)
			r.Close()
			accepted++
			if !c.accept && !c.either {
				t.Errorf("%s: fetched (%q), want refused", c.url, body)
			}
			continue
		}
		if !errors.Is(err, ErrPolicy) || !isPermanent(err) {
			t.Errorf("%s: %v, want a permanent policy refusal", c.url, err)
			continue
		}
		refused++
		if c.accept {
			t.Errorf("%s: refused (%v), want fetched", c.url, err)
		}
	}
	t.Logf("SSRF corpus: tried %d, refused %d, accepted %d, leaked %d", tried, refused, accepted, leaked.Load())
	fmt.Printf("SSRF corpus: tried %d, refused %d, accepted %d, leaked %d\n", tried, refused, accepted, leaked.Load())
	if tried < 30 || leaked.Load() != 0 {
		t.Errorf("tried %d (want >= 30), leaked %d (want 0)", tried, leaked.Load())
	}
}
