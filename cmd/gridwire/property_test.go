package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/pkg/cluster"
	"github.com/gridwire/gridwire/pkg/taskcred"
	"github.com/gridwire/gridwire/services/ingest"
	"github.com/gridwire/gridwire/services/property"
	"github.com/nats-io/nats.go/jetstream"
)

// propertyTopology is a session on the local fork cluster: a server that writes peer and
// hands its property API address and credential to the test, and a client that reads
// peer with curl, as any program on the host could, until a value is there.
func propertyTopology(dir string) string {
	return `<topology name="props">
  <property name="peer"/>
  <decltask name="server">
    <exe reachable="true">/bin/sh -c 'printenv GRIDWIRE_PROPERTY_URL > ` + dir + `/server.url.tmp; printenv GRIDWIRE_PROPERTY_TOKEN > ` + dir + `/server.token.tmp; mv ` + dir + `/server.url.tmp ` + dir + `/server.url; mv ` + dir + `/server.token.tmp ` + dir + `/server.token; until [ -e ` + dir + `/stop ]; do sleep 0.05; done'</exe>
    <properties><name access="write">peer</name></properties>
  </decltask>
  <decltask name="client">
    <exe reachable="true">/bin/sh -c 'until curl -sf -o ` + dir + `/client.tmp -H "Authorization: Bearer $GRIDWIRE_PROPERTY_TOKEN" "$GRIDWIRE_PROPERTY_URL/v1/tasks/self/properties/peer"; do sleep 0.05; done; mv ` + dir + `/client.tmp ` + dir + `/client.got'</exe>
    <properties><name access="read">peer</name></properties>
  </decltask>
  <main name="main"><task>server</task><task>client</task></main>
</topology>`
}

// waitContent returns a file's content once it exists (the test fails after a minute).
func waitContent(t *testing.T, path string) string {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if b, err := os.ReadFile(path); err == nil {
			return strings.TrimSpace(string(b))
		}
	}
	t.Fatalf("%s never appeared", path)
	return ""
}

// taskEnv is the environment of the task whose address and credential are in dir.
func taskEnv(t *testing.T, dir, task string) func(string) string {
	url, token := waitContent(t, filepath.Join(dir, task+".url")), waitContent(t, filepath.Join(dir, task+".token"))
	return func(k string) string {
		return map[string]string{events.VarPropertyURL: url, events.VarPropertyToken: token}[k]
	}
}

func propertyCLI(ctx context.Context, getenv func(string) string, args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	status := runStatus(ctx, append([]string{"property"}, args...), getenv, &out, &errb)
	return status, out.String(), errb.String()
}

// On the local fork cluster a task writes a property with `gridwire property put` and
// another task of the session reads it over HTTP; what the writer does not declare is
// refused with the reason; the session's history holds the write; once the session has
// ended the credential is spent.
func TestPropertiesOnTheForkCluster(t *testing.T) {
	server := serveCLI(t)
	ctx := context.Background()
	dir := t.TempDir()
	// However the test ends, the server task ends too (before serve stops).
	t.Cleanup(func() { _ = os.WriteFile(filepath.Join(dir, "stop"), nil, 0o644) })
	topo := writeFile(t, t.TempDir(), "props.xml", propertyTopology(dir))
	out, errOut, err := runCLI(ctx, "submit", "--server", server, topo)
	if err != nil {
		t.Fatalf("submit: %v %s", err, errOut)
	}
	session := strings.Fields(out)[0]
	writer := taskEnv(t, dir, "server")
	if status, _, errOut := propertyCLI(ctx, writer, "put", "peer", "10.1.2.3:5555"); status != 0 {
		t.Fatalf("property put: exit %d: %s", status, errOut)
	}
	var got struct {
		Value      string `json:"value"`
		WriterPath string `json:"writer_path"`
	}
	if err := json.Unmarshal([]byte(waitContent(t, filepath.Join(dir, "client.got"))), &got); err != nil ||
		got.Value != "10.1.2.3:5555" || got.WriterPath != "main/server_0" {
		t.Fatalf("the client read %+v (%v)", got, err)
	}
	for _, c := range []struct {
		args   []string
		status int
		says   string
	}{
		{[]string{"put", "other", "x"}, exitRefused, "does not declare it"},
		{[]string{"get", "peer"}, exitRefused, "declares it with write access"},
		{[]string{"put", "peer", strings.Repeat("x", 300)}, exitUsage, "the limit is 256"},
	} {
		if status, _, errOut := propertyCLI(ctx, writer, c.args...); status != c.status || !strings.Contains(errOut, c.says) {
			t.Errorf("property %s: exit %d %q, want %d saying %q", c.args[0], status, errOut, c.status, c.says)
		}
	}
	// VALUE - is the command's standard input.
	var out2, errb bytes.Buffer
	if status := runStatusIn(ctx, []string{"property", "put", "peer", "-"}, writer, strings.NewReader(strings.Repeat("y", 300)+"\n"), &out2, &errb); status != exitUsage ||
		!strings.Contains(errb.String(), "the limit is 256") {
		t.Errorf("property put peer - of 300 characters: exit %d %q", status, errb.String())
	}
	if status, _, errOut := propertyCLI(ctx, func(string) string { return "" }, "get", "peer"); status != exitRefused ||
		!strings.Contains(errOut, "GRIDWIRE_PROPERTY_URL") {
		t.Errorf("outside a task: exit %d %q", status, errOut)
	}
	if err := os.WriteFile(filepath.Join(dir, "stop"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	waitSessionSucceeded(ctx, t, server, session)
	out, _, err = runCLI(ctx, "history", "--server", server, session)
	if err != nil || strings.Count(out, "dev.gridwire.job.property_set.v1") != 1 {
		t.Fatalf("the session's history (%v):\n%s", err, out)
	}
	status, _, errOut := propertyCLI(ctx, writer, "put", "peer", "late")
	if status != exitRefused || !strings.Contains(errOut, "has ended") {
		t.Fatalf("an ended task wrote: exit %d %q", status, errOut)
	}
}

// What tasks set is signed like every event (the audit verifies the session), sound
// (the invariants check each writer's declaration), and the live view rebuilt from the
// log equals the live one, while the session runs and once it has ended and its values
// left the view; a tampered live entry is found.
func TestPropertyReplayAndAuditVerbs(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	acc, err := h.submit.Submit(ctx, ingest.Submission{File: "props.xml", Data: []byte(ddsProperties), Submitter: "test"})
	if err != nil {
		t.Fatal(err)
	}
	session, writer, reader := acc.Jobs[0], acc.Jobs[1], acc.Jobs[2]
	h.waitFor(writer, "RUNNING", isRunning)
	h.waitFor(reader, "RUNNING", isRunning)
	h.mu.Lock()
	api := httptest.NewServer(h.services["readside"].sys.routes())
	h.mu.Unlock()
	t.Cleanup(api.Close)
	key, err := taskcred.Open(ctx, h.client.JS, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"first", "second"} {
		if code, body := request(t, http.MethodPut, api.URL+"/v1/tasks/self/properties/peer", key.Issue(writer), strings.NewReader(v)); code != http.StatusOK {
			t.Fatalf("PUT: %d %s", code, body)
		}
	}
	url := "--nats-url=" + h.natsURL()
	out, errOut, err := runCLI(ctx, "property", "replay", url)
	if err != nil || !strings.Contains(out, "rebuilt 1 properties") || !strings.Contains(out, "identical to the live view gridwire-properties (0 not folded there yet)") {
		t.Fatalf("property replay: %v\n%s%s", err, out, errOut)
	}
	kv, err := h.client.JS.KeyValue(ctx, property.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	live, err := kv.Get(ctx, session+".g.peer")
	if err != nil {
		t.Fatal(err)
	}
	h.release(writer, "0")
	h.release(reader, "0")
	st := h.waitEnd(session)
	if st.Status != events.StatusSucceeded {
		t.Fatalf("session %s", st.Status)
	}
	// The ended session's values leave the live view (and its stamp passes the end), and
	// the rebuild agrees.
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		_, err := kv.Get(ctx, session+".g.peer")
		var stamp property.Meta
		if m, err := kv.Get(ctx, property.MetaKey); err == nil {
			_ = json.Unmarshal(m.Value(), &stamp)
		}
		if errors.Is(err, jetstream.ErrKeyNotFound) && stamp.Seq >= st.LastSeq {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the ended session's property is still in the live view (%v), or its stamp %d is before the end %d", err, stamp.Seq, st.LastSeq)
		}
	}
	out, errOut, err = runCLI(ctx, "property", "replay", url)
	if err != nil || !strings.Contains(out, "rebuilt 0 properties") || !strings.Contains(out, "identical to the live view gridwire-properties (0 not folded there yet)") {
		t.Fatalf("property replay after the session ended: %v\n%s%s", err, out, errOut)
	}
	out, _, err = runCLI(ctx, "audit", "verify", session, url, "--signing-keys="+h.keysDir())
	if err != nil || !strings.Contains(out, ": 0 broken") || strings.Contains(out, "unsigned") {
		t.Fatalf("audit verify of the session: %v\n%s", err, out)
	}
	waitProjection(t, h)
	out, _, err = runCLI(ctx, "audit", "invariants", url)
	if err != nil || !strings.Contains(out, "jobs 3 events ") || !strings.Contains(out, " properties 0 ") || !strings.Contains(out, "property_diffs 0") {
		t.Fatalf("audit invariants: %v\n%s", err, out)
	}
	// A forged entry of the ended session put back into the live view is found.
	forged := strings.Replace(string(live.Value()), `"value":"second"`, `"value":"forged"`, 1)
	if _, err := kv.PutString(ctx, session+".g.peer", forged); err != nil || forged == string(live.Value()) {
		t.Fatalf("forging %s: %v", live.Value(), err)
	}
	out, _, err = runCLI(ctx, "property", "replay", url)
	var ec exitCode
	if !errors.As(err, &ec) || ec != exitFailed || !strings.Contains(out, `differs: `+session+`.g.peer: live "forged"`) {
		t.Fatalf("property replay of a tampered view: %v\n%s", err, out)
	}
	out, _, err = runCLI(ctx, "audit", "invariants", url)
	if !errors.As(err, &ec) || ec != exitFailed || !strings.Contains(out, "property_diffs 1") {
		t.Fatalf("audit invariants of a tampered view: %v\n%s", err, out)
	}
}

// collectionTopology runs two instances of a collection of a writer and a reader on the
// local fork cluster: each writer sets the collection-scoped shm to its own task path
// with curl, each reader reads shm until it is set and writes what it got into dir,
// named by its collection instance.
func collectionTopology(dir string) string {
	auth := `-H "Authorization: Bearer $GRIDWIRE_PROPERTY_TOKEN" "$GRIDWIRE_PROPERTY_URL/v1/tasks/self/properties/shm"`
	return `<topology name="scoped">
  <property name="shm" scope="collection"/>
  <decltask name="writer">
    <exe>/bin/sh -c 'curl -sf -X PUT --data-binary "$DDS_TASK_PATH" ` + auth + `'</exe>
    <properties><name access="write">shm</name></properties>
  </decltask>
  <decltask name="reader">
    <exe>/bin/sh -c 'f=` + dir + `/$(echo "$DDS_TASK_PATH" | tr / _); until curl -sf -o "$f.tmp" ` + auth + `; do [ -e ` + dir + `/stop ] &amp;&amp; exit 1; sleep 0.05; done; mv "$f.tmp" "$f"'</exe>
    <properties><name access="read">shm</name></properties>
  </decltask>
  <declcollection name="pair"><tasks><name>writer</name><name>reader</name></tasks></declcollection>
  <main name="main"><group name="g" n="2"><collection>pair</collection></group></main>
</topology>`
}

// On the local fork cluster, two instances of one collection each set the same
// collection-scoped key: each reader gets the value of its own instance's writer.
func TestCollectionScopeOnTheForkCluster(t *testing.T) {
	server := serveCLI(t)
	ctx := context.Background()
	dir := t.TempDir()
	// However the test ends, the readers end too (before serve stops).
	t.Cleanup(func() { _ = os.WriteFile(filepath.Join(dir, "stop"), nil, 0o644) })
	topo := writeFile(t, t.TempDir(), "scoped.xml", collectionTopology(dir))
	if _, errOut, err := runCLI(ctx, "submit", "--server", server, topo); err != nil {
		t.Fatalf("submit: %v %s", err, errOut)
	}
	for _, inst := range []string{"pair_0", "pair_1"} {
		var got struct {
			Value      string `json:"value"`
			Collection string `json:"collection"`
		}
		body := waitContent(t, filepath.Join(dir, "main_g_"+inst+"_reader_0"))
		if err := json.Unmarshal([]byte(body), &got); err != nil {
			t.Fatal(err)
		}
		if got.Value != "main/g/"+inst+"/writer_0" || got.Collection != "main/g/"+inst {
			t.Errorf("the reader of %s got %+v", inst, got)
		}
	}
}

// An executor run alone (`gridwire executor --task-api`) hands its DDS tasks the API of
// the gateway process it names: a task it started writes, another reads.
func TestExecutorAloneHandsTasksTheGatewaysAPI(t *testing.T) {
	h := newHarnessWith(t, cluster.Default(), "ingest", "incarnator", "stager", "watcher", "readside")
	h.mu.Lock()
	api := httptest.NewServer(h.services["readside"].sys.routes())
	h.mu.Unlock()
	t.Cleanup(api.Close)
	dir := t.TempDir()
	t.Cleanup(func() { _ = os.WriteFile(filepath.Join(dir, "stop"), nil, 0o644) })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, _, err := runCLI(ctx, "executor", "--nats-url", h.natsURL(), "--data", h.dir, "--log-level", "error",
			"--task-api", strings.TrimPrefix(api.URL, "http://"))
		done <- err
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("the executor ended with %v", err)
		}
	})
	acc, err := h.submit.Submit(context.Background(), ingest.Submission{File: "props.xml", Data: []byte(propertyTopology(dir)), Submitter: "test"})
	if err != nil {
		t.Fatal(err)
	}
	writer := taskEnv(t, dir, "server")
	if got := writer(events.VarPropertyURL); got != api.URL {
		t.Fatalf("the task was given %q, want the gateway's %s", got, api.URL)
	}
	if status, _, errOut := propertyCLI(context.Background(), writer, "put", "peer", "from-alone"); status != 0 {
		t.Fatalf("property put: exit %d: %s", status, errOut)
	}
	if got := waitContent(t, filepath.Join(dir, "client.got")); !strings.Contains(got, `"from-alone"`) {
		t.Fatalf("the client read %s", got)
	}
	if err := os.WriteFile(filepath.Join(dir, "stop"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if st := h.waitEnd(acc.Jobs[0]); st.Status != events.StatusSucceeded {
		t.Fatalf("session %s (%s)", st.Status, st.Reason)
	}
}

// `gridwire property watch` resumes a dropped stream from the last sequence it printed:
// nothing is missed, nothing printed twice.
func TestPropertyWatchResumes(t *testing.T) {
	var mu sync.Mutex
	var lastIDs []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		lastIDs = append(lastIDs, r.Header.Get("Last-Event-ID"))
		n := len(lastIDs)
		mu.Unlock()
		if r.Header.Get("Authorization") != "Bearer tok" || r.URL.Query().Get("watch") != "1" {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		// Each connection sends one value and drops; the second resends the first
		// unless asked to resume after it.
		seq := n
		if r.Header.Get("Last-Event-ID") == "" {
			seq = 1
		}
		fmt.Fprintf(w, "id: %d\nevent: property\ndata: {\"key\":\"peer\",\"value\":\"v%d\",\"seq\":%d}\n\n", seq, seq, seq)
	}))
	t.Cleanup(srv.Close)
	getenv := func(k string) string {
		return map[string]string{events.VarPropertyURL: srv.URL, events.VarPropertyToken: "tok"}[k]
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := lockedWriter{mu: &sync.Mutex{}, w: &bytes.Buffer{}}
	printed := func() string {
		out.mu.Lock()
		defer out.mu.Unlock()
		return out.w.String()
	}
	done := make(chan int, 1)
	go func() { done <- runStatus(ctx, []string{"property", "watch"}, getenv, out, io.Discard) }()
	for deadline := time.Now().Add(30 * time.Second); strings.Count(printed(), "\n") < 3; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("watch printed %q", printed())
		}
	}
	cancel()
	if status := <-done; status != 0 {
		t.Fatalf("watch ended with %d", status)
	}
	if got := printed(); !strings.HasPrefix(got, "peer=v1\npeer=v2\npeer=v3\n") {
		t.Fatalf("watch printed %q", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if lastIDs[0] != "" || lastIDs[1] != "1" || lastIDs[2] != "2" {
		t.Fatalf("the reconnections asked to resume after %q", lastIDs)
	}
}

// waitSessionSucceeded waits up to a minute for the session to be SUCCEEDED.
func waitSessionSucceeded(ctx context.Context, t *testing.T, server, session string) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		out, _, _ := runCLI(ctx, "status", "--json", "--server", server, session)
		var v jobView
		if json.Unmarshal([]byte(out), &v) == nil && v.Status == string(events.StatusSucceeded) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the session did not succeed: %s", out)
		}
	}
}
