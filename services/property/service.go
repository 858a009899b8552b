package property

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/pkg/taskcred"
	"github.com/nats-io/nats.go/jetstream"
)

// Config is the service's plain configuration; the zero value is valid.
type Config struct {
	// Bucket is the live view's KV bucket; default Bucket.
	Bucket string
	// Flush is how often the projection's stamp is written; default one second.
	Flush time.Duration
	// PutWait bounds how long a write waits for its value to reach this process's view
	// of the live view before it answers; default five seconds.
	PutWait time.Duration
}

// Validate reports configuration errors.
func (c Config) Validate() error {
	if c.Flush < 0 || c.PutWait < 0 {
		return errors.New("property: negative flush interval or put wait")
	}
	return nil
}

func (c Config) withDefaults() Config {
	if c.Bucket == "" {
		c.Bucket = Bucket
	}
	if c.Flush == 0 {
		c.Flush = time.Second
	}
	if c.PutWait == 0 {
		c.PutWait = 5 * time.Second
	}
	return c
}

// Store is what the service needs of the event store: a task's state, and a decided
// append to its session.
type Store interface {
	State(ctx context.Context, jobID string) (events.State, error)
	Decide(ctx context.Context, jobID string, decide events.Decision) (events.State, error)
}

// Deps are the service's live collaborators.
type Deps struct {
	JS     jetstream.JetStream
	Store  Store
	Key    taskcred.Key // verifies the tasks' credentials
	Logger *slog.Logger
	Now    func() time.Time
}

// Service is the task-side property API and the live view's projector.
type Service struct {
	cfg  Config
	deps Deps
	hub  *hub
}

// New returns the service; Routes serves its API, Run its projection and watch.
func New(cfg Config, deps Deps) (*Service, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if deps.JS == nil || deps.Store == nil {
		return nil, errors.New("property: needs JetStream and the event store")
	}
	if deps.Logger == nil {
		deps.Logger = slog.New(slog.DiscardHandler)
	}
	if deps.Now == nil {
		deps.Now = time.Now
	}
	return &Service{cfg: cfg.withDefaults(), deps: deps, hub: newHub()}, nil
}

// Run projects the log's property sets into the live view and watches it for the
// process's watching tasks, until ctx ends; it returns after both have stopped.
func (s *Service) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	wg.Go(func() { runProjector(ctx, s.deps.JS, s.cfg.Bucket, s.cfg.Flush, s.deps.Logger) })
	wg.Go(func() { s.hub.run(ctx, s.deps.JS, s.cfg.Bucket, s.deps.Logger) })
	wg.Wait()
	return nil
}
