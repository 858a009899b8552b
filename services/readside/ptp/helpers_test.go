package ptp

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/events/eventstest"
	"github.com/gridwire/gridwire/pkg/cluster"
	"github.com/gridwire/gridwire/pkg/httpapi"
)

// fakeIngest stands in for ingest's submit subject: it appends the submitted event of a
// job made from the attribute list's execName and jobNumProcs. The package's own tests
// need no description language; the full path through ingest is tested in cmd/gridwire.
type fakeIngest struct {
	store *events.Store
	mu    sync.Mutex
	jobs  []string
}

func (f *fakeIngest) Submit(ctx context.Context, doc []byte, file string, caller httpapi.Grant) ([]string, error) {
	var attrs []string
	if err := json.Unmarshal(doc, &attrs); err != nil {
		return nil, err
	}
	j := events.Job{ID: events.NewID(), Count: 1, Submitter: caller.Principal}
	for _, a := range attrs {
		k, v, _ := strings.Cut(a, "=")
		switch k {
		case "execName":
			j.Name, j.Executable = v, v
		case "jobNumProcs":
			if v == "4" {
				j.Count = 4
			}
		}
	}
	if j.Executable == "" {
		return nil, errors.New("(request):1:1: execName: missing: nothing to run")
	}
	e, err := events.New(j.ID, events.Submitted, "", time.Now(), j)
	if err != nil {
		return nil, err
	}
	if _, err := f.store.Create(ctx, e); err != nil {
		return nil, err
	}
	f.mu.Lock()
	f.jobs = append(f.jobs, j.ID)
	f.mu.Unlock()
	return []string{j.ID}, nil
}

// fakeControl appends the request, as the executor's control API does.
type fakeControl struct{ store *events.Store }

func (f fakeControl) Request(ctx context.Context, jobID string, name events.Name, reason, principal string) error {
	_, err := f.store.Decide(ctx, jobID, func(s events.State) ([]events.Event, error) {
		if s.Status.Terminal() {
			return nil, errors.New("job ended")
		}
		e, err := events.New(jobID, name, s.Cluster, time.Now(), events.Note{Reason: reason})
		return []events.Event{e}, err
	})
	return err
}

type harness struct {
	t      *testing.T
	store  *events.Store
	ingest *fakeIngest
	svc    *Service
	addr   string
}

func newHarness(t *testing.T) *harness { return newHarnessWith(t, Config{}) }

// newHarnessWith runs the endpoint with cfg and one local fork cluster.
func newHarnessWith(t *testing.T, cfg Config) *harness {
	t.Helper()
	b, store := eventstest.Open(t, "ptp-test")
	h := &harness{t: t, store: store, ingest: &fakeIngest{store: store}}
	ctx, cancel := context.WithCancel(context.Background())
	cfg.Clusters = []cluster.Cluster{{Name: "local", Kind: "fork", LRMS: "Fork"}}
	svc, err := New(ctx, cfg, Deps{JS: b.JS, Submit: h.ingest, Control: fakeControl{store}})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- svc.RunListener(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("RunListener: %v", err)
		}
	})
	h.svc, h.addr = svc, ln.Addr().String()
	return h
}

// step appends the next event of a job's life, as the pipeline's services would.
func (h *harness) step(jobID string, name events.Name, payload any) {
	h.t.Helper()
	_, err := h.store.Decide(context.Background(), jobID, func(s events.State) ([]events.Event, error) {
		e, err := events.New(jobID, name, "local", time.Now(), payload)
		return []events.Event{e}, err
	})
	if err != nil {
		h.t.Fatalf("%s %s: %v", jobID, name, err)
	}
}

// run takes a submitted job to RUNNING on the local cluster.
func (h *harness) run(jobID string) {
	h.step(jobID, events.Incarnated, events.IncarnatedData{Cluster: "local", Queue: "default", Profile: "fork"})
	h.step(jobID, events.Queued, events.QueuedData{Cluster: "local"})
	h.step(jobID, events.Started, events.StartedData{Cluster: "local", Host: "localhost", NativeID: "4242", Running: true})
}

// finish takes a running job to SUCCEEDED with the exit code.
func (h *harness) finish(jobID string, code int) {
	h.step(jobID, events.Exited, events.ExitedData{ExitCode: code})
	h.step(jobID, events.StagedOut, events.StagedOutData{OK: true})
	h.step(jobID, events.Succeeded, events.EndData{ExitCode: &code})
}

func (h *harness) lastJob() string {
	h.ingest.mu.Lock()
	defer h.ingest.mu.Unlock()
	return h.ingest.jobs[len(h.ingest.jobs)-1]
}
