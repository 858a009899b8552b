package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"path/filepath"
	"syscall"

	"github.com/gridwire/gridwire/pkg/cluster"
	"github.com/gridwire/gridwire/pkg/httpapi"
	"github.com/gridwire/gridwire/services/incarnator"
	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"
)

func serveCmd(e *env) *cobra.Command {
	f := &busFlags{}
	var httpAddr, ptpAddr string
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "run NATS (embedded unless --nats-url), every service and the HTTP API",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return serve(cmd.Context(), e, f, httpAddr, ptpAddr)
		},
	}
	f.register(cmd.Flags(), e)
	cmd.Flags().StringVar(&httpAddr, "http", "127.0.0.1:8080", "HTTP API address")
	cmd.Flags().StringVar(&ptpAddr, "ptp-listen", "", "also serve Eclipse PTP resource-manager sessions here (e.g. 127.0.0.1:7790); beyond loopback only with tokens")
	return cmd
}

func serve(ctx context.Context, e *env, f *busFlags, httpAddr, ptpAddr string) error {
	// The config is checked whole before anything starts: tokens, listeners, clusters.
	cfg, err := cluster.Load(f.config)
	if err != nil {
		return err
	}
	if err := checkServe(cfg, httpAddr); err != nil {
		return err
	}
	if err := checkClusters(cfg, f); err != nil {
		return err
	}
	if ptpAddr != "" {
		if err := checkServe(cfg, ptpAddr); err != nil {
			return fmt.Errorf("--ptp-listen: %w", err)
		}
	}
	// A port another process holds refuses the start before the data directory is
	// touched. The listeners themselves are bound once the log is open, so that the API
	// accepting connections still means the whole system (an embedded NATS listener
	// included) is up.
	for _, l := range [][2]string{{"--http", httpAddr}, {"--ptp-listen", ptpAddr}} {
		if err := probeListen(l[0], l[1]); err != nil {
			return err
		}
	}
	sys, err := openSystem(ctx, e, f, true)
	if err != nil {
		return err
	}
	defer sys.close()
	if sys.listener, err = listen("--http", httpAddr); err != nil {
		return err
	}
	sys.own = append(sys.own, sys.listener.Addr().String())
	// The PTP listener is opened before the services start, so the stager knows it as
	// one of the gateway's own (never reachable through staging).
	var ptpLn net.Listener
	if ptpAddr != "" {
		if ptpLn, err = listen("--ptp-listen", ptpAddr); err != nil {
			sys.listener.Close()
			return err
		}
		sys.own = append(sys.own, ptpLn.Addr().String())
	}
	g, gctx := errgroup.WithContext(ctx)
	if err := sys.start(gctx, g, allServices, f.clusters); err != nil {
		sys.listener.Close()
		if ptpLn != nil {
			ptpLn.Close()
		}
		return err
	}
	if ptpLn != nil {
		if err := sys.startPTP(gctx, g, ptpLn); err != nil {
			return err
		}
	}
	addr := sys.listener.Addr().String()
	sys.log.Info("gridwire serving", "http", "http://"+addr, "data", sys.data,
		"nats", firstOf(sys.bus.ClientURL(), "in-process"), "clusters", len(sys.cfg.Clusters))
	fmt.Fprintf(e.stderr, "gridwire: HTTP API on http://%s\n", addr)
	return g.Wait()
}

// listen binds a listener a flag names, saying which flag when the address is taken.
func listen(flag, addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if errors.Is(err, syscall.EADDRINUSE) {
		return nil, fmt.Errorf("%s %s: the address is in use (another gridwire serve?); stop that process or give %s another address", flag, addr, flag)
	}
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", flag, addr, err)
	}
	return ln, nil
}

// probeListen binds and releases an address a flag names: whether it can be served.
func probeListen(flag, addr string) error {
	if addr == "" {
		return nil
	}
	ln, err := listen(flag, addr)
	if err != nil {
		return err
	}
	return ln.Close()
}

// checkClusters plans every cluster of the config with its OS profile before anything
// starts, as the incarnator will: a profile that is missing or cannot run jobs refuses
// the start with the config's line, with nothing made under --data.
func checkClusters(cfg cluster.Config, f *busFlags) error {
	profiles, err := incarnator.LoadProfiles(cfg.ProfileDir)
	if errors.Is(err, fs.ErrNotExist) && cfg.ProfileDir != "" {
		return cfg.Locate(fmt.Errorf("profile_dir: %w", err))
	}
	if err != nil {
		return err
	}
	data, err := filepath.Abs(firstOf(f.data, cfg.DataDir, ".gridwire-data"))
	if err != nil {
		return err
	}
	_, err = incarnator.NewPlanner(cfg, profiles, filepath.Join(data, "jobs"))
	return cfg.Locate(err)
}

// checkServe reads the API tokens of the config before anything starts: with none, only
// a loopback address may be served.
func checkServe(cfg cluster.Config, httpAddr string) error {
	auth, err := httpapi.NewAuth(cfg.Tokens)
	if err != nil {
		return cfg.Locate(err)
	}
	return checkListen(auth, httpAddr)
}

func checkListen(auth *httpapi.Auth, httpAddr string) error {
	if err := auth.CheckListen(httpAddr); err != nil {
		return usageErrorf("--http %s: %v; add tokens to the config to serve other hosts", httpAddr, err)
	}
	return nil
}

// serviceCmd runs one service alone against an external NATS. The read side alone
// serves its HTTP API with --http.
func serviceCmd(e *env, name string) *cobra.Command {
	f := &busFlags{}
	var httpAddr, taskAPI string
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
			if taskAPI != "" {
				if _, _, err := net.SplitHostPort(taskAPI); err != nil {
					return usageErrorf("--task-api %q: %v (host:port of a gateway's HTTP API)", taskAPI, err)
				}
				sys.taskAPI = taskAPI
			}
			if httpAddr != "" {
				if err := checkListen(sys.auth, httpAddr); err != nil {
					return err
				}
				if sys.listener, err = listen("--http", httpAddr); err != nil {
					return err
				}
			}
			g, gctx := errgroup.WithContext(cmd.Context())
			if err := sys.start(gctx, g, []string{name}, f.clusters); err != nil {
				if sys.listener != nil {
					sys.listener.Close()
				}
				return err
			}
			return g.Wait()
		},
	}
	f.register(cmd.Flags(), e)
	if name == "readside" {
		cmd.Flags().StringVar(&httpAddr, "http", "", "serve the read API here (e.g. 127.0.0.1:8080); empty serves none")
	}
	if name == "executor" {
		cmd.Flags().StringVar(&taskAPI, "task-api", e.getenv("GRIDWIRE_TASK_API"),
			"host:port of a gateway's HTTP API (a read side's --http) that DDS tasks use for their properties; tasks on SSH hosts reach it through this executor's connections; empty: tasks get no property API")
	}
	return cmd
}
