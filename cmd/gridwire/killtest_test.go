//go:build e2e

package main

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/pkg/cluster"
	"github.com/gridwire/gridwire/services/ingest"
)

// executorProc is one `gridwire executor` process.
type executorProc struct {
	cmd  *exec.Cmd
	done chan struct{}
}

func startExecutor(t *testing.T, bin, natsURL, data string, n int) *executorProc {
	t.Helper()
	cmd := exec.Command(bin, "executor", "--cluster", "local", "--nats-url", natsURL, "--data", data, "--log-level", "error", "--allow-root-jobs")
	logf, err := os.OpenFile(filepath.Join(data, fmt.Sprintf("executor-%d.log", n)), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &executorProc{cmd: cmd, done: make(chan struct{})}
	go func() {
		cmd.Wait()
		logf.Close()
		close(p.done)
	}()
	return p
}

func (p *executorProc) kill() {
	p.cmd.Process.Kill() // SIGKILL
	<-p.done
}

// buildBinary builds gridwire into a temporary directory.
func buildBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "gridwire")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// Three executor processes share the local cluster's work while one of them, chosen at
// random, is killed with SIGKILL every few seconds and restarted. Every job ends once,
// is started once and runs once: nothing is lost, nothing runs twice.
func TestE2EKillExecutors(t *testing.T) {
	const jobs, minKills = 1000, 20
	bin := buildBinary(t)
	h := newHarnessWith(t, cluster.Default(), "ingest", "incarnator", "stager", "watcher")
	natsURL := h.natsURL()
	runs := filepath.Join(t.TempDir(), "runs")

	procs := make([]*executorProc, 3)
	for i := range procs {
		procs[i] = startExecutor(t, bin, natsURL, h.dir, i)
	}
	var mu sync.Mutex
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, p := range procs {
			p.kill()
		}
	})

	// Jobs arrive in batches while executors die, so kills land on work in flight.
	doc := fmt.Sprintf(`{"version": 3, "executable": "/bin/sh", "arguments": ["-c", "echo {taskid} >> %s"]}`, runs)
	const batches = minKills
	ids := make([]string, 0, jobs)
	submitted := make(chan []string, batches)
	go func() {
		defer close(submitted)
		for b := 0; b < batches; b++ {
			var batch []string
			for i := b * jobs / batches; i < (b+1)*jobs/batches; i++ {
				acc, err := h.submit.Submit(context.Background(), ingest.Submission{File: "kill.json", Data: []byte(doc), Submitter: "killtest"})
				if err != nil {
					t.Error(err)
					return
				}
				batch = append(batch, acc.Jobs[0])
			}
			submitted <- batch
			time.Sleep(time.Second)
		}
	}()

	kills := 0
	deadline := time.Now().Add(10 * time.Minute)
	var open []string
	for kills < minKills || len(open) > 0 || len(ids) < jobs {
		if time.Now().After(deadline) {
			t.Fatalf("after %d kills, not every job ended in 10 minutes", kills)
		}
		time.Sleep(time.Duration(1500+rand.IntN(1500)) * time.Millisecond)
	drain:
		for {
			select {
			case batch, ok := <-submitted:
				if !ok {
					if len(ids) < jobs {
						t.Fatalf("only %d of %d jobs submitted", len(ids), jobs)
					}
					break drain
				}
				ids, open = append(ids, batch...), append(open, batch...)
			default:
				break drain
			}
		}
		open = unended(h, open)
		if kills >= minKills {
			continue
		}
		i := rand.IntN(len(procs))
		mu.Lock()
		procs[i].kill()
		procs[i] = startExecutor(t, bin, natsURL, h.dir, i)
		mu.Unlock()
		kills++
	}
	t.Logf("%d jobs ended across %d executor kills", jobs, kills)

	lines := runLines(t, runs)
	adopted := 0
	for _, id := range ids {
		st, err := h.store.State(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if st.Status != events.StatusSucceeded {
			t.Errorf("job %s: %s (%s)", id, st.Status, st.Reason)
		}
		started, terminal := 0, 0
		for _, e := range h.history(id) {
			if e.Name == events.Started {
				started++
				var d events.StartedData
				if e.Payload(&d) == nil && d.Adopted {
					adopted++
				}
			}
			if e.Name.Terminal() {
				terminal++
			}
		}
		if started != 1 || terminal != 1 || lines[id] != 1 {
			t.Errorf("job %s: %d started events, %d terminal events, ran %d times", id, started, terminal, lines[id])
		}
	}
	t.Logf("%d runs were adopted from a killed executor's start", adopted)
	if total := sum(lines); total != jobs {
		t.Errorf("%d runs recorded for %d jobs", total, jobs)
	}
}

// unended is the jobs of ids that have not ended yet.
func unended(h *harness, ids []string) []string {
	var out []string
	for _, id := range ids {
		st, err := h.store.State(context.Background(), id)
		if err != nil || !st.Status.Terminal() {
			out = append(out, id)
		}
	}
	return out
}

func runLines(t *testing.T, path string) map[string]int {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]int{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		out[strings.TrimSpace(sc.Text())]++
	}
	return out
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}
