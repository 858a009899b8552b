//go:build e2e

package main

import (
	"context"
	"encoding/json"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/pkg/sshx/sshtest"
)

// twoSSHHosts starts two real sshd on loopback ports that take the same client key, and
// returns a config with one ssh cluster per host, named wa and wb (known_hosts holds both
// keys), so a DDS wnname requirement puts a task on either.
func twoSSHHosts(t *testing.T) string {
	t.Helper()
	a := sshtest.StartOpenSSH(t)
	// sshd keeps the first value of a keyword: the second host takes the first's key.
	b := sshtest.StartOpenSSH(t, "AuthorizedKeysFile "+filepath.Join(filepath.Dir(a.Dir), "authorized_keys"))
	known := filepath.Join(t.TempDir(), "known_hosts")
	var both []byte
	for _, f := range []string{a.KnownHostsFile, b.KnownHostsFile} {
		k, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		both = append(both, k...)
	}
	if err := os.WriteFile(known, both, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := "clusters:\n"
	for name, srv := range map[string]*sshtest.OpenSSH{"wa": a, "wb": b} {
		cfg += "  - name: " + name + "\n    kind: ssh\n    hosts: [" + srv.Addr + "]\n    user: " + a.User +
			"\n    identity: " + a.ClientKeyFile + "\n    known_hosts: " + known + "\n    profile: fork\n    lrms: Fork\n    work_root: " + a.Dir + "\n"
	}
	return writeFile(t, t.TempDir(), "gridwire.yaml", cfg)
}

// sharedDir is a directory the SSH login user can write in and this test can read.
func sharedDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "gw-e2e-props-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	return dir
}

// Over real sshd: a writer task on an SSH host sets a property with `gridwire property
// put` (its value: the address it was given), a reader task waits for it with `gridwire
// property watch --once`. Both reach the gateway through a loopback port on their host
// forwarded over the executor's connection, not through the gateway's own listener; no
// credential is in the log.
func TestE2EPropertiesOverSSH(t *testing.T) {
	cfg := twoSSHHosts(t)
	shared := sharedDir(t)
	bin := filepath.Join(shared, "gridwire")
	if err := os.Rename(buildBinary(t), bin); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	server := serveCLI(t, "--config", cfg)
	topo := writeFile(t, t.TempDir(), "props.xml", `<topology name="remote-props">
  <property name="peer"/>
  <property name="nobody"/>
  <declrequirement name="onA" type="wnname" value="wa"/>
  <declrequirement name="onB" type="wnname" value="wb"/>
  <decltask name="server">
    <requirements><name>onA</name></requirements>
    <exe>/bin/sh -c '`+bin+` property put peer "$GRIDWIRE_PROPERTY_URL" &amp;&amp; ! `+bin+` property put nobody x 2> `+shared+`/refused'</exe>
    <properties><name access="write">peer</name></properties>
  </decltask>
  <decltask name="client">
    <requirements><name>onB</name></requirements>
    <exe>/bin/sh -c '`+bin+` property watch --once --json peer > `+shared+`/got.tmp &amp;&amp; mv `+shared+`/got.tmp `+shared+`/got'</exe>
    <properties><name access="read">peer</name></properties>
  </decltask>
  <main name="main"><task>server</task><task>client</task></main>
</topology>`)
	ctx := context.Background()
	out, errOut, err := runCLI(ctx, "submit", "--server", server, topo)
	if err != nil {
		t.Fatalf("submit: %v %s", err, errOut)
	}
	ids := strings.Fields(out)
	session := ids[0]
	var got struct {
		Value string    `json:"value"`
		Time  time.Time `json:"time"`
	}
	gotFile := filepath.Join(shared, "got")
	if err := json.Unmarshal([]byte(waitContent(t, gotFile)), &got); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(gotFile); err == nil {
		// Reported, not asserted: how long after the set the reader on the other host
		// had the value (the file's time bounds it from above).
		t.Logf("set at %s, on the reader's host by %s (%s)", got.Time.Format(time.RFC3339Nano),
			fi.ModTime().UTC().Format(time.RFC3339Nano), fi.ModTime().Sub(got.Time))
	}
	u, err := url.Parse(got.Value)
	if err != nil {
		t.Fatalf("the reader got %q", got.Value)
	}
	gateway, _ := url.Parse(server)
	host, port, _ := net.SplitHostPort(u.Host)
	if host != "127.0.0.1" || port == gateway.Port() {
		t.Fatalf("the writer was given %q: want a forwarded loopback port, not the gateway's %s", got.Value, gateway.Host)
	}
	waitSessionSucceeded(ctx, t, server, session)
	for i, want := range map[int]string{1: "wa", 2: "wb"} {
		out, _, _ := runCLI(ctx, "status", "--json", "--server", server, ids[i])
		var v jobView
		if err := json.Unmarshal([]byte(out), &v); err != nil || v.Cluster != want {
			t.Fatalf("task %d ran on %q (%v), want the host of %s", i, v.Cluster, err, want)
		}
	}
	// The writer has ended, so its refused write's message is whole.
	if refused := waitContent(t, filepath.Join(shared, "refused")); !strings.Contains(refused, "does not declare it") {
		t.Fatalf("an undeclared write: %q", refused)
	}
	out, _, err = runCLI(ctx, "history", "--json", "--server", server, session)
	if err != nil || !strings.Contains(out, "property_set") {
		t.Fatalf("the session's history (%v):\n%s", err, out)
	}
	list, _, _ := runCLI(ctx, "list", "--json", "--server", server)
	checked := 0
	for _, id := range strings.Fields(strings.NewReplacer("\"", " ", ",", " ").Replace(list)) {
		if !events.ValidJobID(id) || len(id) != 26 {
			continue
		}
		h, _, _ := runCLI(ctx, "history", "--json", "--server", server, id)
		if strings.Contains(h, "gwt1.") {
			t.Fatalf("a task credential is in the history of %s", id)
		}
		if strings.Contains(h, "incarnated") {
			checked++
		}
	}
	if checked != 2 {
		t.Fatalf("looked for credentials in %d task histories with rendered scripts, want 2:\n%s", checked, list)
	}
}

// On a real Slurm (submitted to from this host): sbatch carries the task's environment,
// so a writer task sets a property with `gridwire property put` and a reader task of the
// same session waits for it with `gridwire property watch --once`.
func TestE2EPropertiesOnSlurm(t *testing.T) {
	cl := slurmCluster(t)
	server, ids, _ := batchPropertySession(t, "Slurm", cl.WorkRoot, "from-slurm", func(bin, _ string) string {
		return bin + " property put peer from-slurm"
	})
	waitSessionSucceeded(context.Background(), t, server, ids[0])
}

// batchPropertySession submits, to a batch cluster of the given LRMS (its shipped
// profile, its queue debug, its work root root), a session of a writer task running
// writerExe (given the gridwire binary and a directory every node shares) and a reader
// task that waits for the property peer with `gridwire property watch --once` and
// writes it to the shared file got. It returns the server, the submitted IDs (the
// session first) and the shared directory once the reader got want; if it got anything
// else, the writer's environment is shown when writerExe saved it as writer.env.
func batchPropertySession(t *testing.T, lrms, root, want string, writerExe func(bin, shared string) string) (server string, ids []string, shared string) {
	t.Helper()
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	profile := strings.ToLower(lrms)
	cfg := writeFile(t, t.TempDir(), "gridwire.yaml", "clusters:\n  - name: "+profile+"\n    kind: fork\n    profile: "+profile+
		"\n    lrms: "+lrms+"\n    queues: [debug]\n    work_root: "+root+"\n")
	shared = sharedDir(t)
	bin := filepath.Join(shared, "gridwire")
	if err := os.Rename(buildBinary(t), bin); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	server = serveCLI(t, "--config", cfg)
	topo := writeFile(t, t.TempDir(), "props.xml", `<topology name="`+profile+`-props">
  <property name="peer"/>
  <decltask name="server">
    <exe>`+writerExe(bin, shared)+`</exe>
    <properties><name access="write">peer</name></properties>
  </decltask>
  <decltask name="client">
    <exe>/bin/sh -c '`+bin+` property watch --once peer > `+shared+`/got.tmp &amp;&amp; mv `+shared+`/got.tmp `+shared+`/got'</exe>
    <properties><name access="read">peer</name></properties>
  </decltask>
  <main name="main"><task>server</task><task>client</task></main>
</topology>`)
	out, errOut, err := runCLI(context.Background(), "submit", "--server", server, topo)
	if err != nil {
		t.Fatalf("submit: %v %s", err, errOut)
	}
	if ids = strings.Fields(out); len(ids) != 3 {
		t.Fatalf("submit printed %q, want the session and two tasks", out)
	}
	if got := waitContent(t, filepath.Join(shared, "got")); got != want {
		env, _ := os.ReadFile(filepath.Join(shared, "writer.env"))
		t.Fatalf("the reader got %q; the writer's environment:\n%s", got, env)
	}
	return server, ids, shared
}
