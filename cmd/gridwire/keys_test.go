package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/pkg/cluster"
)

// A cluster's executor signs with its cluster's key and makes no other; a role without a
// key gets one made; the directory's keys are trusted with their grants.
func TestKeysetPicksTheClusterKeyAndMakesMissingOnes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "keys")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	seed, _ := events.NewSeed()
	if err := os.WriteFile(filepath.Join(dir, "executor-hpc1.seed"), append(seed, '\n'), 0o600); err != nil {
		t.Fatal(err)
	}
	ks, err := openKeyset(dir, cluster.Config{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	k, err := ks.signer(events.RoleExecutor, "hpc1")
	if err != nil || k.Grant().Role != events.RoleExecutor || len(k.Grant().Clusters) != 1 || k.Grant().Clusters[0] != "hpc1" {
		t.Fatalf("hpc1's executor signs with %+v (%v)", k, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "executor.seed")); err == nil {
		t.Fatal("a key for every cluster was made for hpc1's executor")
	}
	w, err := ks.signer(events.RoleWatcher, "")
	if err != nil {
		t.Fatal(err)
	}
	again, err := openKeyset(dir, cluster.Config{}, nil)
	if err != nil || again.ring.Len() != 2 {
		t.Fatalf("reopened: %d keys (%v)", again.ring.Len(), err)
	}
	if out := again.config(); !strings.Contains(out, "{role: watcher, key: "+w.PublicKey()+"}") ||
		!strings.Contains(out, "{role: executor, clusters: [hpc1], key: "+k.PublicKey()+"}") {
		t.Fatalf("config section:\n%s", out)
	}
}

// The config's signing keys are checked at load, each error naming its entry.
func TestKeysetRefusesBadConfigKeys(t *testing.T) {
	seed, _ := events.NewSeed()
	good, _ := events.NewSigningKey(seed, events.Grant{Role: events.RoleIngest})
	for _, c := range []struct {
		keys []cluster.SigningKey
		want string
	}{
		{[]cluster.SigningKey{{Role: "ingest", Key: good.PublicKey()}, {Role: "janitor", Key: good.PublicKey()}}, "gw.yaml: signing.keys[1]: events: malformed key: role \"janitor\""},
		{[]cluster.SigningKey{{Role: "stager", Key: "SUAAAA"}}, "gw.yaml: signing.keys[0]: events: malformed key: \"SUAAAA\" is not a public user nkey"},
	} {
		_, err := openKeyset(t.TempDir(), cluster.Config{Path: "gw.yaml", Signing: cluster.Signing{Keys: c.keys}}, nil)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.keys, err, c.want)
		}
	}
}

// A process reading the keys directory while another makes keys in it (a second serve
// on the same data directory, about to be refused by its lock; services sharing a keys
// directory) finds each seed whole or not at all. A seed used to be created empty and
// then written, and a reader in between failed with "malformed key".
func TestKeysBeingMadeAreNeverReadHalfWritten(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "keys")
	ks, err := openKeyset(dir, cluster.Config{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var done atomic.Bool
	var wg sync.WaitGroup
	var reads atomic.Int64
	errs := make(chan error, 4)
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !done.Load() {
				if _, err := openKeyset(dir, cluster.Config{}, nil); err != nil {
					errs <- err
					return
				}
				reads.Add(1)
			}
		}()
	}
	for i := range 300 {
		if _, err := ks.generate(fmt.Sprintf("executor-c%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	done.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("a reader while keys were made (%d reads): %v", reads.Load(), err)
	}
	again, err := openKeyset(dir, cluster.Config{}, nil)
	if err != nil || again.ring.Len() != 300 {
		t.Fatalf("reopened: %d keys (%v), want 300", again.ring.Len(), err)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".*")); len(left) != 0 {
		t.Errorf("files left beside the seeds: %v", left)
	}
}
