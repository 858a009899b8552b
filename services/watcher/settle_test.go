package watcher

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/pkg/cluster"
	"github.com/nats-io/nats.go/jetstream"
)

// A fork job that has ended by the time its started event is followed gets its exit
// recorded without entering the watch bucket (no put, no purge's tombstone); a job
// still running after the settle is put there, followed, and forgotten once it ends,
// as every job was before.
func TestForkJobEndedBeforeFollowSkipsTheWatchBucket(t *testing.T) {
	b, st := openBus(t)
	kv, err := watchBucket(context.Background(), b.JS)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	cfg := Config{Clusters: []cluster.Cluster{{Name: "local", Kind: cluster.KindFork}},
		PollMin: 5 * time.Millisecond, PollMax: 20 * time.Millisecond}
	go func() { done <- Run(ctx, cfg, Deps{JS: b.JS, Conn: b.Conn, Store: st, Logger: nopLog()}) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("watcher: %v", err)
		}
	}()
	started := func(id, exit string) string {
		dir := t.TempDir()
		if err := os.MkdirAll(filepath.Join(dir, events.ControlDir), 0o700); err != nil {
			t.Fatal(err)
		}
		if exit != "" {
			if err := os.WriteFile(filepath.Join(dir, events.ExitFile), []byte(exit), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		steps := life(id, "local", 0)[:7]
		inc := steps[1].Payload.(events.IncarnatedData)
		inc.WorkDir = dir
		steps[1].Payload = inc
		// This test's own PID: the job is alive until its exit status says otherwise.
		steps[6].Payload = events.StartedData{Cluster: "local", NativeID: strconv.Itoa(os.Getpid()), Running: true}
		play(t, st, id, t0, steps)
		return dir
	}
	exitCode := func(id string) (int, bool) {
		for _, e := range eventsOf(t, st, id) {
			if e.Name == events.Exited {
				var d events.ExitedData
				if err := e.Payload(&d); err != nil {
					t.Fatal(err)
				}
				return d.ExitCode, true
			}
		}
		return 0, false
	}

	ended := events.NewID()
	started(ended, "3 why\n")
	eventually(t, "the ended job's exit", func() bool { _, ok := exitCode(ended); return ok })
	if code, _ := exitCode(ended); code != 3 {
		t.Errorf("ended job's exit code %d, want 3", code)
	}
	if h, err := kv.History(context.Background(), "local."+ended); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Errorf("the watch bucket holds %d entries of a job that ended before it was followed (%v)", len(h), err)
	}

	running := events.NewID()
	dir := started(running, "")
	eventually(t, "the running job in the watch bucket", func() bool {
		_, err := kv.Get(context.Background(), "local."+running)
		return err == nil
	})
	if _, ok := exitCode(running); ok {
		t.Fatal("a running job's exit was recorded")
	}
	if err := os.WriteFile(filepath.Join(dir, events.ExitFile), []byte("0\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := b.Conn.Publish(events.HintSubject("exit", "local"), []byte(running)); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the running job's exit", func() bool { _, ok := exitCode(running); return ok })
	eventually(t, "the running job forgotten", func() bool {
		_, err := kv.Get(context.Background(), "local."+running)
		return errors.Is(err, jetstream.ErrKeyNotFound)
	})
}
