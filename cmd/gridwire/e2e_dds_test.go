//go:build e2e

package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/pkg/cluster"
	"github.com/gridwire/gridwire/pkg/sshx/sshtest"
	"github.com/gridwire/gridwire/services/ingest"
	"golang.org/x/crypto/ssh/knownhosts"
)

// twoHosts starts two real sshd on loopback ports and returns an SSH cluster of both:
// one login key both accept, one known_hosts file with both host keys, job directories
// under the first's scratch directory (both hosts are this machine).
func twoHosts(t *testing.T) cluster.Cluster {
	a, b := sshtest.StartOpenSSH(t), sshtest.StartOpenSSH(t)
	pub, err := os.ReadFile(a.ClientKeyFile + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	authorized, err := os.OpenFile(filepath.Join(filepath.Dir(b.ClientKeyFile), "authorized_keys"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := authorized.Write(pub); err != nil {
		t.Fatal(err)
	}
	authorized.Close()
	known := filepath.Join(t.TempDir(), "known_hosts")
	lines := knownhosts.Line([]string{a.Addr}, a.HostKey(t, "ed25519")) + "\n" + knownhosts.Line([]string{b.Addr}, b.HostKey(t, "ed25519")) + "\n"
	if err := os.WriteFile(known, []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	return cluster.Cluster{Name: "pair", Kind: cluster.KindSSH, Hosts: []string{a.Addr, b.Addr}, User: a.User,
		Identity: a.ClientKeyFile, KnownHosts: known, Profile: "fork", LRMS: "Fork", WorkRoot: a.Dir}
}

// sessionOnHosts is the end-to-end topology: two instances of a collection of two gated
// tasks, at most one instance to a host; a gated task alone; a task that crashes every
// time with RestartTask 3.
const sessionOnHosts = `<topology name="e2e">
  <declrequirement name="one" type="maxinstances" value="1"/>
  <decltrigger name="again" condition="TaskCrashed" action="RestartTask" arg="3"/>
  <decltask name="member"><exe>` + ddsGatedExe + `</exe></decltask>
  <decltask name="solo"><exe>` + ddsGatedExe + `</exe></decltask>
  <decltask name="crash"><exe>/bin/sh -c 'exit 9'</exe><triggers><name>again</name></triggers></decltask>
  <declcollection name="pair"><requirements><name>one</name></requirements><tasks><name n="2">member</name></tasks></declcollection>
  <main name="main">
    <group name="g" n="2"><collection>pair</collection></group>
    <task>solo</task>
    <task>crash</task>
  </main>
</topology>`

// sessionOnHostsV2 drops solo and adds a task alone, extra.
var sessionOnHostsV2 = strings.NewReplacer("<task>solo</task>", "<task>extra</task>",
	`<decltask name="crash">`, `<decltask name="extra"><exe>`+ddsGatedExe+`</exe></decltask>
  <decltask name="crash">`).Replace(sessionOnHosts)

// A DDS session on an SSH cluster of two real hosts: each collection instance lands
// whole on a host of its own, the crashing task runs four times and ends FAILED with
// every attempt in its history, an update starts and stops exactly the changed
// instances, and cancelling the session stops every task.
func TestE2EDDSSessionOnTwoSSHHosts(t *testing.T) {
	h := newHarnessWith(t, cluster.Config{Clusters: []cluster.Cluster{twoHosts(t)}})
	checkDDSSession(t, h, true)
}

// The same topology on the local fork cluster (one host: placement has no say).
func TestE2EDDSSessionOnFork(t *testing.T) {
	checkDDSSession(t, newHarness(t), false)
}

// checkDDSSession runs sessionOnHosts through its whole life. The session's checks are
// subtests of one session, in order; a check of properties between a writer and a
// reader task belongs among them (a task pair declared in the topology, checked before
// the update).
func checkDDSSession(t *testing.T, h *harness, twoHosts bool) {
	ids := h.submitDDS(sessionOnHosts)
	if len(ids) != 7 {
		t.Fatalf("%d jobs, want the session and 6 tasks", len(ids))
	}
	session, members, solo, crash := ids[0], ids[1:5], ids[5], ids[6]
	t.Run("collections land whole on a host each", func(t *testing.T) {
		hosts := map[string]string{} // collection instance -> host
		for _, id := range members {
			st := h.waitFor(id, "RUNNING", isRunning)
			coll := st.Job.DDS.CollectionPath
			if prev, ok := hosts[coll]; ok && prev != st.Host {
				t.Errorf("collection instance %s runs on %s and %s", coll, prev, st.Host)
			}
			hosts[coll] = st.Host
		}
		if len(hosts) != 2 {
			t.Fatalf("collection instances %v, want 2", hosts)
		}
		if twoHosts && hosts["main/g/pair_0"] == hosts["main/g/pair_1"] {
			t.Errorf("both collection instances on %s; maxinstances 1 wants a host each", hosts["main/g/pair_0"])
		}
	})
	t.Run("RestartTask 3: four runs, FAILED, every attempt in the history", func(t *testing.T) {
		st := h.waitFor(crash, "its last attempt", func(s events.State) bool { return s.Status.Terminal() && !s.Restartable() })
		if st.Status != events.StatusFailed || st.Attempt() != 4 || len(st.Attempts) != 3 {
			t.Fatalf("crashing task %s at attempt %d (%d earlier), want FAILED at attempt 4", st.Status, st.Attempt(), len(st.Attempts))
		}
		starts, ends := 0, 0
		for _, e := range h.history(crash) {
			starts += map[bool]int{true: 1}[e.Name == events.Started]
			ends += map[bool]int{true: 1}[e.Name == events.Failed]
		}
		if starts != 4 || ends != 4 {
			t.Errorf("history has %d starts and %d ends, want 4 of each", starts, ends)
		}
	})
	t.Run("update starts and stops exactly the changed instances", func(t *testing.T) {
		h.waitFor(solo, "RUNNING", isRunning)
		up, err := h.submit.UpdateSession(context.Background(), session, ingest.Submission{File: "v2.xml", Data: []byte(sessionOnHostsV2), Submitter: "test"})
		if err != nil {
			t.Fatal(err)
		}
		if len(up.Added) != 1 || len(up.Removed) != 1 || up.Removed[0] != solo || up.Kept != 5 {
			t.Fatalf("update %+v, want extra added, solo (%s) removed, 5 kept", up, solo)
		}
		if st := h.waitEnd(solo); st.Status != events.StatusCancelled {
			t.Errorf("removed task %s (%s), want CANCELLED", st.Status, st.Reason)
		}
		if st := h.waitFor(up.Added[0], "RUNNING", isRunning); st.Job.DDS.TaskPath != "main/extra_0" {
			t.Errorf("added instance %s, want main/extra_0", st.Job.DDS.TaskPath)
		}
		for _, id := range members {
			if st, _ := h.store.State(context.Background(), id); st.Status != events.StatusRunning || st.CancelRequested {
				t.Errorf("kept task %s %s (cancel asked %v), want untouched", id, st.Status, st.CancelRequested)
			}
		}
	})
	t.Run("cancel on the session stops every task", func(t *testing.T) {
		h.ask(session, events.CancelRequested)
		p, _ := h.store.State(context.Background(), session)
		for _, id := range p.Job.ChildIDs() {
			if st := h.waitEnd(id); st.Status == events.StatusRunning || !st.Status.Terminal() {
				t.Errorf("task %s %s after the session's cancel", id, st.Status)
			}
		}
		st := h.waitEnd(session)
		if st.Status != events.StatusFailed && st.Status != events.StatusCancelled {
			t.Fatalf("session %s, want ended", st.Status)
		}
		for _, id := range members {
			if st, _ := h.store.State(context.Background(), id); st.Status != events.StatusCancelled {
				t.Errorf("member %s %s, want CANCELLED", id, st.Status)
			}
		}
	})
}
