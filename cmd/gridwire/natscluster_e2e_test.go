//go:build e2e

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gridwire/gridwire/events"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// natsCluster is three official nats-server processes (the version go.mod pins,
// installed by scripts/install-nats-server.sh) on loopback ports, configured by
// scripts/nats-cluster.sh exactly as deploy/nats/ is: TLS for clients and routes from a
// CA made for the test, sync_interval always, one user per role.
type natsCluster struct {
	t     *testing.T
	dir   string
	bin   string
	env   map[string]string
	mu    sync.Mutex
	nodes []*natsNode
}

type natsNode struct {
	name          string
	client, route int
	cmd           *exec.Cmd
	done          chan struct{}
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func startNATSCluster(t *testing.T) *natsCluster {
	t.Helper()
	out, err := exec.Command("bash", "../../scripts/install-nats-server.sh").Output()
	if err != nil {
		t.Fatalf("installing nats-server: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	c := &natsCluster{t: t, dir: t.TempDir(), bin: lines[len(lines)-1], env: map[string]string{}}
	var spec []string
	for i := 1; i <= 3; i++ {
		n := &natsNode{name: fmt.Sprintf("n%d", i), client: freePort(t), route: freePort(t)}
		c.nodes = append(c.nodes, n)
		spec = append(spec, fmt.Sprintf("%s=127.0.0.1:%d:%d", n.name, n.client, n.route))
	}
	if out, err := exec.Command("bash", "../../scripts/nats-cluster.sh", c.dir, "--nodes", strings.Join(spec, " "),
		"--clusters", "local,hpc1").CombinedOutput(); err != nil {
		t.Fatalf("nats-cluster.sh: %v\n%s", err, out)
	}
	fh, err := os.Open(filepath.Join(c.dir, "nats.env"))
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(fh)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), "="); ok {
			c.env[k] = v
		}
	}
	fh.Close()
	for _, n := range c.nodes {
		c.start(n)
	}
	t.Cleanup(c.stopAll)
	c.waitReady()
	return c
}

func (c *natsCluster) start(n *natsNode) {
	c.t.Helper()
	logf, err := os.OpenFile(filepath.Join(c.dir, n.name+".log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		c.t.Fatal(err)
	}
	cmd := exec.Command(c.bin, "-c", filepath.Join(c.dir, n.name+".conf"))
	cmd.Env = os.Environ()
	for k, v := range c.env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	n.cmd, n.done = cmd, make(chan struct{})
	go func(done chan struct{}) {
		_ = cmd.Wait()
		logf.Close()
		close(done)
	}(n.done)
}

// kill is kill -9; restart starts the node again on its store.
func (c *natsCluster) kill(n *natsNode) {
	_ = n.cmd.Process.Signal(syscall.SIGCONT)
	_ = n.cmd.Process.Kill()
	<-n.done
}

func (c *natsCluster) stopAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, n := range c.nodes {
		c.kill(n)
	}
}

// url lists every node, as an operator's --nats-url would.
func (c *natsCluster) url() string {
	var urls []string
	for _, n := range c.nodes {
		urls = append(urls, fmt.Sprintf("tls://127.0.0.1:%d", n.client))
	}
	return strings.Join(urls, ",")
}

func (c *natsCluster) password(user string) string {
	key := "GRIDWIRE_NATS_PW_" + strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z':
			return r - 'a' + 'A'
		case r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
			return r
		}
		return '_'
	}, user)
	return c.env[key]
}

// connect logs in as a role's user ("" is anonymous) to the given URL (default: all).
// jetStreamAs connects as user and returns the connection, its JetStream and a context
// of 30 s; the test's cleanup closes the connection and ends the context.
func (c *natsCluster) jetStreamAs(t *testing.T, user string) (*nats.Conn, jetstream.JetStream, context.Context) {
	t.Helper()
	nc, err := c.connect(user, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return nc, js, ctx
}

func (c *natsCluster) connect(user, url string, opts ...nats.Option) (*nats.Conn, error) {
	if url == "" {
		url = c.url()
	}
	opts = append(opts, nats.RootCAs(filepath.Join(c.dir, "ca.pem")), nats.MaxReconnects(-1))
	if user != "" {
		opts = append(opts, nats.UserInfo(user, c.password(user)))
	}
	return nats.Connect(url, opts...)
}

func (c *natsCluster) waitReady() {
	c.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		nc, err := c.connect("operator", "")
		if err == nil {
			js, _ := jetstream.New(nc)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			_, err = js.AccountInfo(ctx)
			cancel()
			nc.Close()
			if err == nil {
				return
			}
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("the NATS cluster did not become ready: %v", err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// gridwire runs the binary as a role against the cluster, with its password in the
// environment as an operator would set it.
func (c *natsCluster) gridwire(bin, user string, args ...string) *exec.Cmd {
	args = append(args, "--nats-url", c.url(), "--nats-user", user, "--nats-ca", filepath.Join(c.dir, "ca.pem"))
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "GRIDWIRE_NATS_PASSWORD="+c.password(user))
	return cmd
}

// gateway is `gridwire serve --nats-url` against the cluster, as the gateway role.
type gateway struct {
	cmd  *exec.Cmd
	http string
	data string // its data directory; its role keys are in keys/
	done chan struct{}
}

func (c *natsCluster) serve(t *testing.T, bin string) *gateway {
	t.Helper()
	addr := freeAddr(t)
	data := t.TempDir()
	// CI runs as root: the built-in fork cluster's jobs run as root knowingly.
	cmd := c.gridwire(bin, "gateway", "serve", "--data", data, "--http", addr, "--log-level", "warn", "--allow-root-jobs")
	logf, err := os.Create(filepath.Join(data, "serve.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	g := &gateway{cmd: cmd, http: "http://" + addr, data: data, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); logf.Close(); close(g.done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-g.done:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-g.done
		}
		if t.Failed() {
			if b, err := os.ReadFile(filepath.Join(data, "serve.log")); err == nil {
				t.Logf("serve log:\n%s", tail(b, 4000))
			}
		}
	})
	deadline := time.Now().Add(60 * time.Second)
	for {
		if resp, err := http.Get(g.http + "/healthz"); err == nil {
			resp.Body.Close()
			return g
		}
		select {
		case <-g.done:
			b, _ := os.ReadFile(filepath.Join(data, "serve.log"))
			t.Fatalf("serve ended:\n%s", tail(b, 4000))
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("serve did not answer on its HTTP API")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// groupTopology is a DDS topology of six tasks: a parent record and six children.
const groupTopology = `<topology name="cluster-group">
  <decltask name="w"><exe>/bin/sh -c 'exit 0'</exe></decltask>
  <main name="main"><group name="g" n="6"><task>w</task></group></main>
</topology>`

// submit posts one v3 JSON description with its idempotency key; the request is bounded.
func (g *gateway) submit(doc, key string) ([]string, error) {
	return g.submitAs(doc, key, "application/json")
}

// submitAs is submit of a document of the given content type.
func (g *gateway) submitAs(doc, key, contentType string) ([]string, error) {
	client := &http.Client{Timeout: 15 * time.Second}
	req, err := http.NewRequest(http.MethodPost, g.http+"/v1/jobs", strings.NewReader(doc))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", contentType)
	req.Header.Set("Idempotency-Key", key)
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var acc struct {
		Jobs []string `json:"jobs"`
	}
	if resp.StatusCode/100 != 2 {
		var b bytes.Buffer
		_, _ = b.ReadFrom(resp.Body)
		return nil, fmt.Errorf("POST /v1/jobs: %s: %s", resp.Status, b.String())
	}
	if err := json.NewDecoder(resp.Body).Decode(&acc); err != nil || len(acc.Jobs) == 0 {
		return nil, fmt.Errorf("POST /v1/jobs: no job IDs (%v)", err)
	}
	return acc.Jobs, nil
}

// status reads a job's state through the gateway's read API.
func (g *gateway) status(id string) (string, error) {
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Get(g.http + "/v1/jobs/" + id)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var st struct {
		Status string `json:"status"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return "", err
	}
	return st.Status, nil
}

// waitTerminal polls every job until it has ended; it returns how many did not.
func (g *gateway) waitTerminal(ids []string, bound time.Duration) (map[string]string, int) {
	final := map[string]string{}
	deadline := time.Now().Add(bound)
	for len(final) < len(ids) && time.Now().Before(deadline) {
		for _, id := range ids {
			if _, done := final[id]; done {
				continue
			}
			if s, err := g.status(id); err == nil && (s == "SUCCEEDED" || s == "FAILED" || s == "CANCELLED") {
				final[id] = s
			}
		}
		if len(final) < len(ids) {
			time.Sleep(200 * time.Millisecond)
		}
	}
	return final, len(ids) - len(final)
}

// invariants runs `gridwire audit invariants` as the operator, expecting exactly ids.
func (c *natsCluster) invariants(t *testing.T, bin string, ids []string) string {
	t.Helper()
	expect := filepath.Join(t.TempDir(), "acknowledged")
	if err := os.WriteFile(expect, []byte(strings.Join(ids, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := c.gridwire(bin, "operator", "audit", "invariants", "--expect", expect, "--data", t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Errorf("audit invariants: %v\n%s", err, tail(out, 4000))
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return lines[len(lines)-1]
}

// replicasOf reports a stream's configured replicas, as the operator sees them.
func replicasOf(t *testing.T, js jetstream.JetStream, stream string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatalf("stream %s: %v", stream, err)
	}
	return s.CachedInfo().Config.Replicas
}

func jobDoc(i int) string {
	return `{"version": 3, "executable": "/bin/sh", "arguments": ["-c", "exit 0"], "description": "cluster job ` + strconv.Itoa(i) + `"}`
}

// `gridwire serve --nats-url` against the three-node cluster, as the gateway role over
// TLS, runs the local cluster's jobs to the end; the log and every bucket it made have
// three replicas; the operator's invariant check passes.
func TestE2ENATSClusterServe(t *testing.T) {
	const jobs = 40
	c := startNATSCluster(t)
	bin := buildBinary(t)
	g := c.serve(t, bin)
	// Beside the gateway's own executor, one that runs as the local cluster's executor
	// role: it shares the work, so its permissions must let it do all of its part. It
	// signs with a key for the local cluster only, made as an operator would and listed
	// in the config the audit reads.
	xkeys := t.TempDir()
	section, err := exec.Command(bin, "keys", "--signing-keys", xkeys, "--generate", "executor-local").Output()
	if err != nil {
		t.Fatalf("keys --generate: %v", err)
	}
	auditConfig := filepath.Join(t.TempDir(), "audit.yaml")
	if err := os.WriteFile(auditConfig, section, 0o600); err != nil {
		t.Fatal(err)
	}
	x := c.gridwire(bin, "executor-local", "executor", "--cluster", "local", "--data", t.TempDir(), "--log-level", "warn",
		"--allow-root-jobs", "--signing-keys", xkeys)
	var xlog bytes.Buffer
	x.Stdout, x.Stderr = &xlog, &xlog
	if err := x.Start(); err != nil {
		t.Fatal(err)
	}
	xdone := make(chan error, 1)
	go func() { xdone <- x.Wait() }()
	t.Cleanup(func() { _ = x.Process.Kill(); <-xdone })
	// Rounds of jobs until the role's process has started some: which of two pullers a
	// message goes to is the server's choice, and on a loaded machine the gateway's own
	// executor can take a whole round before the other process pulls at all.
	var ids []string
	final, stuck, byRole := map[string]string{}, 0, 0
	for round := 0; round < 5 && byRole == 0 && stuck == 0; round++ {
		var batch []string
		for i := round * jobs; i < (round+1)*jobs; i++ {
			got, err := g.submit(jobDoc(i), fmt.Sprintf("serve-%d", i))
			if err != nil {
				t.Fatal(err)
			}
			batch = append(batch, got...)
		}
		ids = append(ids, batch...)
		var f map[string]string
		f, stuck = g.waitTerminal(batch, 3*time.Minute)
		for id, s := range f {
			final[id] = s
		}
		byRole = c.startedBy(t, ids, fmt.Sprintf("-%d", x.Process.Pid))
	}
	// A group on the cluster: its parent follows its children through decisions that
	// read them fresh, through the stream leader on three replicas.
	group, err := g.submitAs(groupTopology, "serve-group", "application/xml")
	if err != nil {
		t.Fatal(err)
	}
	ids = append(ids, group...)
	gf, gstuck := g.waitTerminal(group, 3*time.Minute)
	for id, s := range gf {
		final[id] = s
	}
	stuck += gstuck
	failed := 0
	for _, s := range final {
		if s != "SUCCEEDED" {
			failed++
		}
	}
	nc, err := c.connect("operator", "")
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	// A repeat of the first submission with its key returns its job and appends nothing.
	if again, err := g.submit(jobDoc(0), "serve-0"); err != nil || len(again) != 1 || again[0] != ids[0] {
		t.Errorf("the first submission repeated with its key: %v (%v), want [%s]", again, err, ids[0])
	}
	for _, s := range []string{"JOBS", "KV_gridwire-jobs", "KV_gridwire-watch", "KV_gridwire-idempotency"} {
		if n := replicasOf(t, js, s); n != 3 {
			t.Errorf("stream %s has %d replicas on a three-node cluster, want 3", s, n)
		}
	}
	select {
	case err := <-xdone:
		t.Errorf("the executor role's process ended: %v\n%s", err, xlog.String())
	default:
	}
	if byRole == 0 {
		t.Errorf("the executor-local process started none of %d jobs\n%s", len(ids), xlog.String())
	}
	inv := c.invariants(t, bin, ids)
	t.Logf("cluster serve: jobs %d, succeeded %d, failed %d, stuck %d, started by the executor-local role's process %d; invariants: %s",
		len(ids), len(final)-failed, failed, stuck, byRole, inv)
	if stuck > 0 || failed > 0 {
		t.Fatalf("%d jobs did not end and %d did not succeed", stuck, failed)
	}
	// Every event is signed by a key the audit trusts (the gateway's own, and the one
	// the config lists for the executor-local process), by a role that may write it.
	audit := func() (string, error) {
		out, err := c.gridwire(bin, "reader", "audit", "verify", "--all", "--config", auditConfig,
			"--signing-keys", filepath.Join(g.data, "keys"), "--data", t.TempDir()).CombinedOutput()
		return string(out), err
	}
	if out, err := audit(); err != nil || !strings.Contains(out, ": 0 broken") || strings.Contains(out, "unsigned") {
		t.Fatalf("audit verify of the cluster's log: %v\n%s", err, out)
	}
	c.forgeries(t, g, ids[0], ids[1], audit)
}

// S7: forged events. One on another role's subject is refused by the permissions, one
// that does not carry the job's sequence by the conditional append; three that a role
// with publish rights gets in (a submission unsigned, one signed by a key nobody
// listed, and, with the gateway's password and its ingest key, a correctly chained
// succeeded under the watcher's source) are stored, and the audit names all three.
func (c *natsCluster) forgeries(t *testing.T, g *gateway, victim, victim2 string, audit func() (string, error)) {
	t.Helper()
	tried, byPermissions, byAppend, stored := 0, 0, 0, 0
	violations := make(chan string, 8)
	incv, err := c.connect("incarnator", "", nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { violations <- err.Error() }))
	if err != nil {
		t.Fatal(err)
	}
	defer incv.Close()
	forged := func(id string, key *events.SigningKey) []byte {
		e, err := events.New(id, events.Submitted, "", time.Now(), events.Job{ID: id, Executable: "/bin/true", Submitter: "admin"})
		if err != nil {
			t.Fatal(err)
		}
		e.Source = "gridwire/ingest/forger"
		if key != nil {
			key.Sign(&e)
		}
		body, err := e.Encode()
		if err != nil {
			t.Fatal(err)
		}
		return body
	}
	tried++
	end, _ := events.New(victim, events.Succeeded, "", time.Now(), events.EndData{Reason: "forged"})
	end.Source = "gridwire/watcher/forger"
	endBody, _ := end.Encode()
	if ok, err := try(incv, violations, cell{subject: events.Subject(victim, events.Succeeded, ""), body: string(endBody)}); err != nil || ok {
		t.Errorf("the incarnator published a succeeded event: %v %v", ok, err)
	} else {
		byPermissions++
	}
	_, js, ctx := c.jetStreamAs(t, "ingest")
	tried++
	if _, err := js.Publish(ctx, events.Subject(victim, events.Submitted, ""), forged(victim, nil),
		jetstream.WithExpectLastSequenceForSubject(0, events.JobFilter(victim))); err == nil {
		t.Error("a second submitted event for an existing job was stored")
	} else {
		byAppend++
	}
	seed, _ := events.NewSeed()
	rogue, _ := events.NewSigningKey(seed, events.Grant{Role: events.RoleIngest})
	unsignedID, rogueID := events.NewID(), events.NewID()
	for id, key := range map[string]*events.SigningKey{unsignedID: nil, rogueID: rogue} {
		tried++
		if _, err := js.Publish(ctx, events.Subject(id, events.Submitted, ""), forged(id, key),
			jetstream.WithExpectLastSequenceForSubject(0, events.JobFilter(id))); err != nil {
			t.Fatalf("the ingest role could not submit: %v", err)
		}
		stored++
	}
	tried++
	c.forgeAsAnotherRole(t, g, victim2)
	stored++
	out, err := audit()
	flagged := strings.Count(out, "BROKEN job ")
	t.Logf("S7: forged %d, refused by permissions %d, refused by the conditional append %d, stored %d, flagged by audit verify %d",
		tried, byPermissions, byAppend, stored, flagged)
	var ec *exec.ExitError
	if !errors.As(err, &ec) || ec.ExitCode() != 1 || flagged != stored ||
		!strings.Contains(out, "BROKEN job "+unsignedID) || !strings.Contains(out, "unsigned, stored after") ||
		!strings.Contains(out, "BROKEN job "+rogueID) || !strings.Contains(out, "not a trusted key") ||
		!strings.Contains(out, "BROKEN job "+victim2) || !strings.Contains(out, "not its own") {
		t.Fatalf("audit verify after the forgeries: %v\n%s", err, out)
	}
}

// forgeAsAnotherRole appends, as the gateway's NATS user (which may publish every job
// event) and with the gateway's ingest key, a succeeded event under the watcher's source,
// chained onto the job's last event with the job's sequence: the stream takes it.
func (c *natsCluster) forgeAsAnotherRole(t *testing.T, g *gateway, victim string) {
	t.Helper()
	seed, err := os.ReadFile(filepath.Join(g.data, "keys", "ingest.seed"))
	if err != nil {
		t.Fatal(err)
	}
	key, err := events.NewSigningKey(bytes.TrimSpace(seed), events.Grant{Role: events.RoleIngest})
	if err != nil {
		t.Fatal(err)
	}
	nc, js, ctx := c.jetStreamAs(t, "gateway")
	st, err := events.NewStore(nc, js, "test/forger").State(ctx, victim)
	if err != nil {
		t.Fatal(err)
	}
	e, _ := events.New(victim, events.Succeeded, "", time.Now(), events.EndData{Reason: "forged"})
	e.Source, e.Principal, e.PrevSeq, e.PrevHash = "gridwire/watcher/forger", "mallory", st.LastSeq, st.LastHash
	key.Sign(&e)
	body, err := e.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, events.Subject(victim, events.Succeeded, ""), body,
		jetstream.WithExpectLastSequenceForSubject(st.LastSeq, events.JobFilter(victim))); err != nil {
		t.Fatalf("the gateway's user could not append: %v", err)
	}
}

// long says whether the long versions of the fault tests run (GRIDWIRE_E2E_LONG=1).
func long() bool { return os.Getenv("GRIDWIRE_E2E_LONG") == "1" }

// R4: jobs flow through `serve --nats-url` while, repeatedly, a random node is killed
// with SIGKILL and restarted, or frozen with SIGSTOP and thawed. Submissions are retried
// by the client until acknowledged. Afterwards every job has ended, the invariants hold
// and every replica of JOBS reports the same last sequence. Short: 300 jobs over about
// 45s of faults (5s freezes); long (GRIDWIRE_E2E_LONG=1): 2,000 jobs over 5 minutes
// (20s freezes).
func TestE2ENATSClusterFaults(t *testing.T) {
	jobs, faultFor, freeze := 300, 45*time.Second, 5*time.Second
	if long() {
		jobs, faultFor, freeze = 2000, 5*time.Minute, 20*time.Second
	}
	c := startNATSCluster(t)
	bin := buildBinary(t)
	g := c.serve(t, bin)

	var mu sync.Mutex
	var ids []string
	var acks []time.Time // when each submission was acknowledged, in order
	var retries int
	submitted := make(chan struct{})
	go func() {
		defer close(submitted)
		pace := faultFor / time.Duration(jobs)
		for i := range jobs {
			got, attempt, err := submitUntilAcked(func() ([]string, error) { return g.submit(jobDoc(i), fmt.Sprintf("r4-%d", i)) })
			if err != nil {
				t.Errorf("job %d: no acknowledgement after %d tries: %v", i, attempt, err)
				return
			}
			mu.Lock()
			ids, acks = append(ids, got...), append(acks, time.Now())
			retries += attempt
			mu.Unlock()
			time.Sleep(pace)
		}
	}()

	// Faults begin once the pipeline is under way.
	for wait := time.Now().Add(time.Minute); time.Now().Before(wait); time.Sleep(100 * time.Millisecond) {
		mu.Lock()
		n := len(ids)
		mu.Unlock()
		if n > 0 {
			break
		}
	}
	faults, kills, freezes := 0, 0, 0
	var worstResume [2]time.Duration // after a kill, after a freeze
	end := time.Now().Add(faultFor)
	for i := 0; time.Now().Before(end); i++ {
		n := c.nodes[i%3]
		at := time.Now()
		if i%2 == 0 {
			c.kill(n)
			time.Sleep(2 * time.Second)
			c.start(n)
			kills++
		} else {
			_ = n.cmd.Process.Signal(syscall.SIGSTOP)
			time.Sleep(freeze)
			_ = n.cmd.Process.Signal(syscall.SIGCONT)
			freezes++
		}
		faults++
		// How long after the fault began did the first acknowledged submission come
		// back? (The first after it, not the latest: submissions go on during a freeze.)
		for wait := time.Now().Add(30 * time.Second); time.Now().Before(wait); time.Sleep(100 * time.Millisecond) {
			mu.Lock()
			k := sort.Search(len(acks), func(k int) bool { return acks[k].After(at) })
			var resumed time.Duration
			if k < len(acks) {
				resumed = acks[k].Sub(at)
			}
			mu.Unlock()
			if k < len(acks) {
				worstResume[i%2] = max(worstResume[i%2], resumed)
				break
			}
		}
		time.Sleep(3 * time.Second)
	}
	<-submitted
	mu.Lock()
	acked := append([]string(nil), ids...)
	mu.Unlock()
	final, stuck := g.waitTerminal(acked, 5*time.Minute)
	failed := 0
	for _, s := range final {
		if s != "SUCCEEDED" {
			failed++
		}
	}
	seqs := c.replicaLastSeqs(t)
	inv := c.invariants(t, bin, acked)
	t.Logf("R4: faults %d (kills %d, freezes %d of %s), jobs %d, client retries %d, failed %d, stuck %d, "+
		"slowest resumption of submissions after a kill %s, after a freeze %s; replica last sequences %v; invariants: %s",
		faults, kills, freezes, freeze, len(acked), retries, failed, stuck, worstResume[0].Round(100*time.Millisecond),
		worstResume[1].Round(100*time.Millisecond), seqs, inv)
	if len(acked) != jobs {
		t.Errorf("%d of %d submissions acknowledged", len(acked), jobs)
	}
	if stuck > 0 || failed > 0 {
		t.Errorf("%d jobs stuck, %d not succeeded", stuck, failed)
	}
	for _, s := range seqs[1:] {
		if s != seqs[0] {
			t.Errorf("replicas disagree on JOBS's last sequence: %v", seqs)
			break
		}
	}
}

// replicaLastSeqs asks each node alone for the last sequence of its replica of JOBS,
// once the leader reports every replica current (bounded wait).
func (c *natsCluster) replicaLastSeqs(t *testing.T) []uint64 {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		var seqs []uint64
		for _, n := range c.nodes {
			seqs = append(seqs, c.nodeLastSeq(n))
		}
		same := true
		for _, s := range seqs[1:] {
			same = same && s == seqs[0]
		}
		if same || time.Now().After(deadline) {
			return seqs
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// nodeLastSeq reads the last message of JOBS from one node's own replica: a direct get
// sent through that node is answered by its local replica first.
func (c *natsCluster) nodeLastSeq(n *natsNode) uint64 {
	nc, err := c.connect("operator", fmt.Sprintf("tls://127.0.0.1:%d", n.client), nats.MaxReconnects(0))
	if err != nil {
		return 0
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, "JOBS")
	if err != nil {
		return 0
	}
	m, err := s.GetLastMsgForSubject(ctx, events.SubjectAll)
	if err != nil {
		return 0
	}
	return m.Sequence
}

// cell is one thing a role tries: a core publish or request to a subject.
type cell struct {
	name    string
	subject string
	body    string
}

// try reports whether the server let the user do it: a reply of any kind (an ack, an
// API answer, even an API error such as JOBS's own refusal to purge) means the
// permission held; a permissions violation means it did not.
func try(nc *nats.Conn, violations <-chan string, c cell) (bool, error) {
	inbox := nats.NewInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		return false, err
	}
	defer sub.Unsubscribe()
	if err := nc.PublishRequest(c.subject, inbox, []byte(c.body)); err != nil {
		return false, err
	}
	deadline := time.After(10 * time.Second)
	for {
		select {
		case v := <-violations:
			if strings.Contains(v, c.subject) {
				return false, nil
			}
		case <-deadline:
			return false, fmt.Errorf("%s: neither an answer nor a refusal", c.subject)
		default:
		}
		if _, err := sub.NextMsg(20 * time.Millisecond); err == nil {
			return true, nil
		}
	}
}

// S6/S7: every role tries every subject class and stream operation; exactly the cells
// the roles allow succeed. Anonymous clients are not let in at all.
func TestE2ENATSClusterPermissions(t *testing.T) {
	c := startNATSCluster(t)
	_, js, ctx := c.jetStreamAs(t, "operator")
	if _, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: "JOBS", Subjects: []string{events.SubjectAll},
		Replicas: 3, DenyDelete: true, DenyPurge: true, AllowDirect: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "gridwire-jobs", Replicas: 3}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.connect("", ""); err == nil {
		t.Error("an anonymous client connected to the cluster")
	}

	job := "01M00000000000000000000000"
	ev := func(name, route string) cell {
		return cell{name: name + "." + route, subject: "jobs." + job + "." + name + "." + route, body: "{}"}
	}
	consumer := func(durable, filter string) cell {
		body := fmt.Sprintf(`{"stream_name":"JOBS","config":{"durable_name":%q,"filter_subject":%q,"ack_policy":"explicit"}}`, durable, filter)
		return cell{name: "consume " + durable + " " + filter,
			subject: "$JS.API.CONSUMER.CREATE.JOBS." + durable + "." + filter, body: body}
	}
	multi := func(durable string, filters ...string) cell {
		f, _ := json.Marshal(filters)
		body := fmt.Sprintf(`{"stream_name":"JOBS","config":{"durable_name":%q,"filter_subjects":%s,"ack_policy":"explicit"}}`, durable, f)
		return cell{name: "consume " + durable, subject: "$JS.API.CONSUMER.CREATE.JOBS." + durable, body: body}
	}
	cells := []cell{
		ev("submitted", "_"), ev("submitted", "group"), ev("incarnated", "_"), ev("queued", "local"), ev("started", "local"),
		ev("started", "hpc1"), ev("exited", "local"), ev("succeeded", "_"), ev("cancel_requested", "_"),
		ev("failed", "_"), ev("failed", "local"), ev("directory_deleted", "local"), ev("directory_deleted", "hpc1"),
		{name: "submit over NATS", subject: events.SubjectSubmit, body: `{"version":3,"executable":"/bin/true"}`},
		{name: "write the job table", subject: "$KV.gridwire-jobs.row", body: "{}"},
		multi("executor-control-local", events.TypeFilter(events.CancelRequested, "local"), events.TypeFilter(events.HoldRequested, "local")),
		multi("executor-control-hpc1", events.TypeFilter(events.CancelRequested, "hpc1"), events.TypeFilter(events.HoldRequested, "hpc1")),
		multi("watcher-groups", events.TypeFilter(events.Started, "*"), events.TypeFilter(events.Exited, "*")),
		multi("executor-retention-local", events.TypeFilter(events.StagedOut, "local"), events.TypeFilter(events.Failed, "_")),
		multi("incarnator", events.TypeFilter(events.Submitted, ""), events.TypeFilter(events.Restarted, "")),
		{name: "read (direct get)", subject: "$JS.API.DIRECT.GET.JOBS", body: fmt.Sprintf(`{"last_by_subj":%q}`, events.SubjectAll)},
		consumer("executor-local", events.TypeFilter(events.Queued, "local")), consumer("executor-local", events.TypeFilter(events.Queued, "hpc1")),
		consumer("executor-hpc1", events.TypeFilter(events.Queued, "hpc1")),
		consumer("watcher-session-updates", events.TypeFilter(events.SessionUpdated, "")),
		consumer("watcher-session-updates", events.TypeFilter(events.Queued, "local")),
		{name: "pull executor-local", subject: "$JS.API.CONSUMER.MSG.NEXT.JOBS.executor-local", body: `{"batch":1,"no_wait":true}`},
		{name: "purge JOBS", subject: "$JS.API.STREAM.PURGE.JOBS"},
		{name: "delete a message", subject: "$JS.API.STREAM.MSG.DELETE.JOBS", body: `{"seq":1}`},
		{name: "delete JOBS", subject: "$JS.API.STREAM.DELETE.JOBS"},
	}
	// allowed[role] lists the cells the role may do; every other cell must be refused.
	allowed := map[string][]string{
		"gateway": {"submitted._", "submitted.group", "incarnated._", "queued.local", "started.local", "started.hpc1", "exited.local",
			"succeeded._", "cancel_requested._", "failed._", "failed.local", "directory_deleted.local", "directory_deleted.hpc1",
			"submit over NATS", "write the job table", "consume executor-control-local", "consume executor-control-hpc1",
			"consume watcher-groups", "consume executor-retention-local",
			"consume incarnator", "read (direct get)", "consume executor-local jobs.*.queued.local",
			"consume executor-local jobs.*.queued.hpc1", "consume executor-hpc1 jobs.*.queued.hpc1", "pull executor-local",
			"consume watcher-session-updates jobs.*.session_updated.*", "consume watcher-session-updates jobs.*.queued.local"},
		"ingest":     {"submitted._", "submitted.group", "cancel_requested._", "read (direct get)"},
		"incarnator": {"incarnated._", "failed._", "consume incarnator", "read (direct get)"},
		"stager":     {"queued.local", "failed._", "read (direct get)"},
		"watcher": {"exited.local", "succeeded._", "cancel_requested._", "failed._", "failed.local", "write the job table", "consume watcher-groups",
			// The watcher reads the log through ordered consumers too, so it may give its
			// own durables any filter: that reads no more than its direct gets may.
			"consume watcher-session-updates jobs.*.session_updated.*", "consume watcher-session-updates jobs.*.queued.local",
			"read (direct get)"},
		"executor-local": {"started.local", "failed._", "directory_deleted.local", "consume executor-control-local",
			"consume executor-retention-local", "read (direct get)", "consume executor-local jobs.*.queued.local", "pull executor-local"},
		"executor-hpc1": {"started.hpc1", "failed._", "directory_deleted.hpc1", "consume executor-control-hpc1", "read (direct get)",
			"consume executor-hpc1 jobs.*.queued.hpc1"},
		"readside": {"write the job table", "read (direct get)"},
		"reader":   {"read (direct get)"},
	}
	// The operator may do everything; its delete of JOBS comes last.
	var opCells []string
	for _, cl := range cells {
		opCells = append(opCells, cl.name)
	}
	allowed["operator"] = opCells
	roles := []string{"gateway", "ingest", "incarnator", "stager", "watcher", "executor-local", "executor-hpc1", "readside", "reader", "operator"}

	// The ingest role answers submissions (a stand-in for ingest, which the cell needs
	// only to be answered).
	ingest, err := c.connect("ingest", "")
	if err != nil {
		t.Fatal(err)
	}
	defer ingest.Close()
	if _, err := ingest.Subscribe(events.SubjectSubmit, func(m *nats.Msg) { _ = m.Respond([]byte("{}")) }); err != nil {
		t.Fatal(err)
	}
	if err := ingest.Flush(); err != nil {
		t.Fatal(err)
	}
	matrix, bad := 0, 0
	for _, role := range roles {
		violations := make(chan string, 64)
		nc, err := c.connect(role, "", nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			violations <- err.Error()
		}))
		if err != nil {
			t.Fatalf("%s: %v", role, err)
		}
		may := map[string]bool{}
		for _, name := range allowed[role] {
			may[name] = true
		}
		var row []string
		for _, cl := range cells {
			ok, err := try(nc, violations, cl)
			if err != nil {
				t.Errorf("%s: %v", role, err)
				continue
			}
			matrix++
			mark := "-"
			if ok {
				mark = "+"
			}
			row = append(row, mark+cl.name)
			if ok != may[cl.name] {
				bad++
				t.Errorf("role %s, %s: allowed=%v, want %v", role, cl.name, ok, may[cl.name])
			}
		}
		nc.Close()
		t.Logf("%-15s %s", role, strings.Join(row, " "))
	}
	t.Logf("S6: roles %d, cells %d, cells not as the roles say %d", len(roles), matrix, bad)
}

// startedBy counts the jobs whose started event names an executor ID ending in suffix.
func (c *natsCluster) startedBy(t *testing.T, ids []string, suffix string) int {
	t.Helper()
	nc, err := c.connect("reader", "")
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	st := events.NewStore(nc, js, "test/reader")
	n := 0
	for _, id := range ids {
		h, err := st.Load(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range h.Events {
			var d events.StartedData
			if e.Name == events.Started && e.Payload(&d) == nil && strings.HasSuffix(d.Executor, suffix) {
				n++
			}
		}
	}
	return n
}

// R2: the gateway (`serve --nats-url`) is killed with SIGKILL again and again during a
// burst of submissions; the client retries each submission with its idempotency key
// until it is acknowledged, against whichever gateway runs. Every acknowledged
// submission is in the log once, every job ends. Short: 5 kills, 150 jobs; long
// (GRIDWIRE_E2E_LONG=1): 20 kills, 1,000 jobs.
func TestE2EGatewayKills(t *testing.T) {
	kills, jobs := 5, 150
	if long() {
		kills, jobs = 20, 1000
	}
	c := startNATSCluster(t)
	bin := buildBinary(t)
	var mu sync.Mutex
	g := c.serve(t, bin)
	current := func() *gateway { mu.Lock(); defer mu.Unlock(); return g }

	var ids []string
	var retries int
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range jobs {
			got, attempt, err := submitUntilAcked(func() ([]string, error) { return current().submit(jobDoc(i), fmt.Sprintf("r2-%d", i)) })
			if err != nil {
				t.Errorf("job %d: no acknowledgement after %d tries: %v", i, attempt, err)
				return
			}
			mu.Lock()
			ids, retries = append(ids, got...), retries+attempt
			mu.Unlock()
		}
	}()
	for k := 0; k < kills; k++ {
		time.Sleep(time.Duration(500+k*137%700) * time.Millisecond)
		old := current()
		_ = old.cmd.Process.Kill()
		<-old.done
		next := c.serve(t, bin)
		mu.Lock()
		g = next
		mu.Unlock()
	}
	<-done
	mu.Lock()
	acked := append([]string(nil), ids...)
	mu.Unlock()
	final, stuck := current().waitTerminal(acked, 5*time.Minute)
	failed := 0
	for _, s := range final {
		if s != "SUCCEEDED" {
			failed++
		}
	}
	inv := c.invariants(t, bin, acked)
	t.Logf("R2: gateway kills %d, jobs %d, client retries %d, failed %d, stuck %d; invariants: %s",
		kills, len(acked), retries, failed, stuck, inv)
	if len(acked) != jobs || stuck > 0 || failed > 0 {
		t.Errorf("%d of %d acknowledged, %d stuck, %d failed", len(acked), jobs, stuck, failed)
	}
}

// R9: with jobs in flight (submitted, and some running), every process is killed at
// once, SIGKILL: the three NATS nodes and the gateway. Then all start again, cold. Every
// acknowledged job ends, nothing is lost or doubled, no job runs twice. Short: 150 jobs
// of 1s each; long (GRIDWIRE_E2E_LONG=1): 500.
func TestE2EColdRestart(t *testing.T) {
	jobs := 150
	if long() {
		jobs = 500
	}
	c := startNATSCluster(t)
	bin := buildBinary(t)
	g := c.serve(t, bin)
	var ids []string
	for i := range jobs {
		doc := `{"version": 3, "executable": "/bin/sh", "arguments": ["-c", "sleep 1"], "description": "r9 ` + strconv.Itoa(i) + `"}`
		got, err := g.submit(doc, fmt.Sprintf("r9-%d", i))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, got...)
	}
	// Everything dies at once while the jobs are in flight.
	_ = g.cmd.Process.Kill()
	<-g.done
	c.mu.Lock()
	for _, n := range c.nodes {
		c.kill(n)
	}
	for _, n := range c.nodes {
		c.start(n)
	}
	c.mu.Unlock()
	c.waitReady()
	g = c.serve(t, bin)
	final, stuck := g.waitTerminal(ids, 5*time.Minute)
	failed := 0
	for _, s := range final {
		if s != "SUCCEEDED" {
			failed++
		}
	}
	inv := c.invariants(t, bin, ids)
	t.Logf("R9: cold restart of 3 NATS nodes and the gateway with %d jobs in flight: failed %d, stuck %d; invariants: %s",
		len(ids), failed, stuck, inv)
	if stuck > 0 || failed > 0 {
		t.Errorf("after the cold restart %d jobs did not end and %d did not succeed: a crash must not fail a job", stuck, failed)
	}
}

// R3: one official nats-server (no cluster) is killed with SIGKILL and restarted on its
// store again and again while jobs flow through `serve --nats-url`, the client retrying
// with idempotency keys. Every acknowledged job ends, once. Short: 5 kills, 150 jobs;
// long (GRIDWIRE_E2E_LONG=1): 20 kills, 1,000 jobs.
func TestE2ESingleServerKills(t *testing.T) {
	kills, jobs := 5, 150
	if long() {
		kills, jobs = 20, 1000
	}
	c := startNATSCluster(t) // for its installed server binary and helpers only
	c.stopAll()
	dir := t.TempDir()
	port := freePort(t)
	conf := filepath.Join(dir, "single.conf")
	if err := os.WriteFile(conf, []byte(fmt.Sprintf(`listen: "127.0.0.1:%d"
jetstream { store_dir: %q, sync_interval: always }
authorization { user: gateway, password: $GRIDWIRE_NATS_PW_GATEWAY }
`, port, filepath.Join(dir, "store"))), 0o600); err != nil {
		t.Fatal(err)
	}
	single := &natsCluster{t: t, dir: c.dir, bin: c.bin, env: c.env,
		nodes: []*natsNode{{name: "single", client: port}}}
	start := func() {
		n := single.nodes[0]
		cmd := exec.Command(single.bin, "-c", conf)
		cmd.Env = append(os.Environ(), "GRIDWIRE_NATS_PW_GATEWAY="+c.password("gateway"))
		logf, err := os.OpenFile(filepath.Join(dir, "single.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stdout, cmd.Stderr = logf, logf
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		n.cmd, n.done = cmd, make(chan struct{})
		go func(done chan struct{}) { _ = cmd.Wait(); logf.Close(); close(done) }(n.done)
	}
	start()
	t.Cleanup(func() { single.kill(single.nodes[0]) })
	bin := buildBinary(t)
	addr := freeAddr(t)
	data := t.TempDir()
	cmd := exec.Command(bin, "serve", "--nats-url", fmt.Sprintf("nats://127.0.0.1:%d", port), "--nats-user", "gateway",
		"--data", data, "--http", addr, "--log-level", "warn", "--allow-root-jobs")
	cmd.Env = append(os.Environ(), "GRIDWIRE_NATS_PASSWORD="+c.password("gateway"))
	var slog bytes.Buffer
	cmd.Stdout, cmd.Stderr = &slog, &slog
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	g := &gateway{cmd: cmd, http: "http://" + addr, data: data, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(g.done) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-g.done })
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if resp, err := http.Get(g.http + "/healthz"); err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve did not answer:\n%s", slog.String())
		}
	}

	var mu sync.Mutex
	var ids []string
	var retries int
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range jobs {
			got, attempt, err := submitUntilAcked(func() ([]string, error) { return g.submit(jobDoc(i), fmt.Sprintf("r3-%d", i)) })
			if err != nil {
				t.Errorf("job %d: no acknowledgement after %d tries: %v", i, attempt, err)
				return
			}
			mu.Lock()
			ids, retries = append(ids, got...), retries+attempt
			mu.Unlock()
			time.Sleep(50 * time.Millisecond)
		}
	}()
	for k := 0; k < kills; k++ {
		time.Sleep(time.Duration(800+k*211%900) * time.Millisecond)
		single.kill(single.nodes[0])
		time.Sleep(500 * time.Millisecond)
		start()
	}
	<-done
	select {
	case <-g.done:
		t.Fatalf("serve ended while its server was restarted:\n%s", slog.String())
	default:
	}
	mu.Lock()
	acked := append([]string(nil), ids...)
	mu.Unlock()
	final, stuck := g.waitTerminal(acked, 5*time.Minute)
	failed := 0
	for _, s := range final {
		if s != "SUCCEEDED" {
			failed++
		}
	}
	expect := filepath.Join(t.TempDir(), "acknowledged")
	if err := os.WriteFile(expect, []byte(strings.Join(acked, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	inv := exec.Command(bin, "audit", "invariants", "--expect", expect, "--data", t.TempDir(),
		"--nats-url", fmt.Sprintf("nats://127.0.0.1:%d", port), "--nats-user", "gateway")
	inv.Env = append(os.Environ(), "GRIDWIRE_NATS_PASSWORD="+c.password("gateway"))
	out, err := inv.CombinedOutput()
	if err != nil {
		t.Errorf("audit invariants: %v\n%s", err, tail(out, 4000))
	}
	t.Logf("R3: server kills %d, jobs %d, client retries %d, failed %d, stuck %d; invariants: %s",
		kills, len(acked), retries, failed, stuck, strings.TrimSpace(string(tail(out, 300))))
	if len(acked) != jobs || stuck > 0 || failed > 0 {
		t.Errorf("%d of %d acknowledged, %d stuck, %d failed", len(acked), jobs, stuck, failed)
	}
}

// submitUntilAcked calls submit every 100 ms until it is acknowledged, as a client does
// after a lost answer: a retry carries the same idempotency key, since the lost one may
// have landed. It returns the job IDs and how many retries it took, or the last error
// after 600 retries.
func submitUntilAcked(submit func() ([]string, error)) ([]string, int, error) {
	for attempt := 0; ; attempt++ {
		got, err := submit()
		if err == nil {
			return got, attempt, nil
		}
		if attempt > 600 {
			return nil, attempt, err
		}
		time.Sleep(100 * time.Millisecond)
	}
}
