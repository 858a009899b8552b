package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/gridwire/gridwire/pkg/cluster"
	"github.com/gridwire/gridwire/pkg/httpapi"
	"github.com/gridwire/gridwire/services/executor"
	"github.com/gridwire/gridwire/services/stager"
	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"
)

func serveCmd(e *env) *cobra.Command {
	f := &busFlags{}
	var httpAddr string
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "run NATS (embedded unless --nats-url), every service and the HTTP API",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return serve(cmd.Context(), e, f, httpAddr)
		},
	}
	f.register(cmd.Flags(), e)
	cmd.Flags().StringVar(&httpAddr, "http", "127.0.0.1:8080", "HTTP API address")
	return cmd
}

func serve(ctx context.Context, e *env, f *busFlags, httpAddr string) error {
	auth, err := serveAuth(f.config, httpAddr)
	if err != nil {
		return err
	}
	sys, err := openSystem(ctx, e, f, true)
	if err != nil {
		return err
	}
	defer sys.close()
	ln, err := net.Listen("tcp", httpAddr)
	if err != nil {
		return fmt.Errorf("HTTP listener: %w", err)
	}
	sys.own = append(sys.own, ln.Addr().String())
	g, gctx := errgroup.WithContext(ctx)
	if err := sys.start(gctx, g, allServices, f.clusters); err != nil {
		ln.Close()
		return err
	}
	if sys.readAPI != nil {
		sys.readAPI.Auth, sys.readAPI.Logger = auth, sys.log.With("service", "api")
		g.Go(func() error { return sys.readAPI.Run(gctx) })
	}
	// Requests see gctx: a shutdown ends the live streams (event streams, followed
	// output) that would otherwise hold it up.
	srv := &http.Server{Handler: auth.Middleware(sys.routes()), ReadHeaderTimeout: 10 * time.Second,
		BaseContext: func(net.Listener) context.Context { return gctx }}
	g.Go(func() error {
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	})
	g.Go(func() error {
		<-gctx.Done()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(gctx), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(sctx); err != nil {
			// A client that connected and never sent a request holds Shutdown up for
			// seconds; such a connection has nothing to lose.
			sys.log.Warn("HTTP shutdown: closing the connections left", "err", err)
			return srv.Close()
		}
		return nil
	})
	sys.log.Info("gridwire serving", "http", "http://"+ln.Addr().String(), "data", sys.data,
		"nats", firstOf(sys.bus.ClientURL(), "in-process"), "clusters", len(sys.cfg.Clusters))
	fmt.Fprintf(e.stderr, "gridwire: HTTP API on http://%s\n", ln.Addr())
	return g.Wait()
}

// serveAuth reads the API tokens of the config: with none, only a loopback address may
// be served.
func serveAuth(config, httpAddr string) (*httpapi.Auth, error) {
	cfg, err := cluster.Load(config)
	if err != nil {
		return nil, err
	}
	auth, err := httpapi.NewAuth(cfg.Tokens)
	if err != nil {
		return nil, fmt.Errorf("config tokens: %w", err)
	}
	if err := auth.CheckListen(httpAddr); err != nil {
		return nil, fmt.Errorf("--http %s: %w; add tokens to the config to serve other hosts", httpAddr, err)
	}
	return auth, nil
}

// routes is the HTTP API of a process that runs ingest and the watcher.
func (s *system) routes() http.Handler {
	mux := http.NewServeMux()
	if s.ingest != nil {
		mux.Handle("POST /v1/jobs", s.ingest)
	}
	if s.readAPI != nil {
		s.readAPI.Routes(mux)
		mux.Handle("GET /metrics", s.readAPI.Metrics().Handler())
	}
	if s.readAPI != nil {
		executor.ControlAPI{Store: s.readAPI.Store}.Routes(mux)
	}
	if s.ingest != nil {
		stager.UploadAPI{JS: s.bus.JS}.Routes(mux)
	}
	mux.HandleFunc("GET /v1/version", serveVersion)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	return mux
}

// serviceCmd runs one service alone against an external NATS.
func serviceCmd(e *env, name string) *cobra.Command {
	f := &busFlags{}
	cmd := &cobra.Command{
		Use:   name,
		Short: "run the " + name + " service alone (needs --nats-url)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			sys, err := openSystem(cmd.Context(), e, f, false)
			if err != nil {
				return err
			}
			defer sys.close()
			g, gctx := errgroup.WithContext(cmd.Context())
			if err := sys.start(gctx, g, []string{name}, f.clusters); err != nil {
				return err
			}
			return g.Wait()
		},
	}
	f.register(cmd.Flags(), e)
	return cmd
}
