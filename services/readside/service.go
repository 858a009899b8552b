// Package readside is everything that reads the log for someone outside it: the job
// table projection in KV (kept live here, rebuilt by Rebuild), the HTTP API of jobs,
// histories and the live event stream (SSE), the web page, the metrics, and the audit
// of hash chains. It appends nothing: the way in (descriptions, other systems' events)
// is ingest's, cancel/hold/resume are the executor's, and what happened on a target is
// the watcher's to record.
package readside

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/pkg/cluster"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"golang.org/x/sync/errgroup"
)

// Config is the read side's plain configuration. The zero value keeps the projection in
// JobsBucket and serves it.
type Config struct {
	// Bucket is the KV bucket of the job table projection (default JobsBucket).
	Bucket string
	// NoProjector leaves the projection to another read-side process: this one only
	// mirrors the bucket into its job table.
	NoProjector bool
	// FlushEvery is how often the projector writes what it folded (default 100ms).
	FlushEvery time.Duration
	// Clusters are the targets whose hosts the read side reaches to read jobs' output
	// (GET /v1/jobs/{id}/logs): this host for a fork cluster, SFTP for an SSH one.
	Clusters []cluster.Cluster
}

// Validate reports configuration errors.
func (c Config) Validate() error {
	if c.FlushEvery < 0 {
		return fmt.Errorf("readside: flush interval %v < 0", c.FlushEvery)
	}
	return nil
}

func (c Config) withDefaults() Config {
	if c.Bucket == "" {
		c.Bucket = JobsBucket
	}
	if c.FlushEvery == 0 {
		c.FlushEvery = 100 * time.Millisecond
	}
	return c
}

// Store is what the read side needs of the event store: a job's events as stored, read
// without scanning the log (Stored), and a scan of one subject filter.
type Store interface {
	Stored(ctx context.Context, jobID string) ([]events.Event, error)
	Scan(ctx context.Context, filter string, from uint64, max int) ([]events.Event, bool, error)
}

// Deps are the read side's live collaborators.
type Deps struct {
	JS     jetstream.JetStream
	Store  Store
	Logger *slog.Logger
	// Metrics receives the read side's collectors (jobs by cluster and state, append
	// latency, consumer lag) and is what GET /metrics serves, with whatever else the
	// process registered there (the watcher's polls). Nil: a registry of its own, with
	// the Go and process collectors.
	Metrics *prometheus.Registry
	// HTTP is where the read side serves, if anywhere.
	HTTP HTTP
}

// HTTP is the process's HTTP API. Run adds the read routes (jobs, histories, the event
// stream, the web page, /metrics) to Mux, then serves Mux, wrapped by Wrap, on Listener
// until ctx ends: routes are in place before the first request is read. Mux may already
// hold the routes other rooms of the process offer (ingest's way in, the executor's
// control requests); the read side serves them and knows nothing of them. A nil
// Listener serves nothing.
type HTTP struct {
	Listener net.Listener
	Mux      *http.ServeMux                  // nil: a fresh one
	Wrap     func(http.Handler) http.Handler // around every route (authentication); nil: none
}

// Run keeps the projection and serves HTTP from the table it folds (with NoProjector,
// from a mirror of the bucket) until ctx ends; it returns after every goroutine it
// started has stopped.
func Run(ctx context.Context, cfg Config, deps Deps) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	cfg = cfg.withDefaults()
	if deps.Logger == nil {
		deps.Logger = slog.New(slog.DiscardHandler)
	}
	if deps.Metrics == nil {
		deps.Metrics = prometheus.NewRegistry()
		deps.Metrics.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	a := &api{store: deps.Store, js: deps.JS, bucket: cfg.Bucket, table: NewTable(), log: deps.Logger,
		targets: newTargets(cfg.Clusters, deps.Logger)}
	defer a.targets.Close()
	m, err := newMetrics(deps.Metrics, a.table, deps.JS)
	if err != nil {
		return err
	}
	g, gctx := errgroup.WithContext(ctx)
	if cfg.NoProjector {
		g.Go(func() error { return a.mirror(gctx) })
	} else {
		// The API serves the table the projector folds: one copy of it in memory.
		g.Go(func() error {
			return runProjector(gctx, deps.JS, cfg.Bucket, cfg.FlushEvery, deps.Logger, m, a.table)
		})
	}
	if deps.HTTP.Listener != nil {
		mux := deps.HTTP.Mux
		if mux == nil {
			mux = http.NewServeMux()
		}
		a.routes(mux, deps.Metrics)
		h := jsonErrors(mux)
		if deps.HTTP.Wrap != nil {
			h = deps.HTTP.Wrap(h)
		}
		serveHTTP(gctx, g, deps.HTTP.Listener, h, deps.Logger)
	}
	return g.Wait()
}

// serveHTTP serves h on ln in g until ctx ends, then shuts the server down, giving
// requests under way a few seconds to finish. Requests see ctx: a shutdown ends the live
// streams (event streams, followed output) that would otherwise hold it up.
func serveHTTP(ctx context.Context, g *errgroup.Group, ln net.Listener, h http.Handler, log *slog.Logger) {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second,
		BaseContext: func(net.Listener) context.Context { return ctx }}
	g.Go(func() error {
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	})
	g.Go(func() error {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(sctx); err != nil {
			// A client that connected and never sent a request holds Shutdown up for
			// seconds; such a connection has nothing to lose.
			log.Warn("HTTP shutdown: closing the connections left", "err", err)
			return srv.Close()
		}
		return nil
	})
}
