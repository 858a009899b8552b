package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/pkg/httpapi"
	"github.com/gridwire/gridwire/services/executor"
	"github.com/gridwire/gridwire/services/ingest"
	"github.com/gridwire/gridwire/services/readside/ptp"
	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"
)

// natsSubmitter hands a PTP attribute list to ingest over its submit subject, the way in
// every process shares, with the session's token: ingest takes the submitter from it.
type natsSubmitter struct{ nc *nats.Conn }

func (s natsSubmitter) Submit(ctx context.Context, doc []byte, file string, caller httpapi.Grant) ([]string, error) {
	m := nats.NewMsg(events.SubjectSubmit)
	m.Data = doc
	m.Header.Set(ingest.HeaderFile, file)
	m.Header.Set(ingest.HeaderFormat, ingest.FormatPTP)
	if t := caller.Bearer(); t != "" {
		m.Header.Set("Authorization", "Bearer "+t)
	}
	reply, err := s.nc.RequestMsgWithContext(ctx, m)
	if err != nil {
		return nil, fmt.Errorf("asking ingest: %w", err)
	}
	if code, _ := strconv.Atoi(reply.Header.Get("Status-Code")); code/100 != 2 {
		var body struct {
			Error *httpapi.Error `json:"error"`
		}
		if json.Unmarshal(reply.Data, &body) == nil && body.Error != nil {
			return nil, errors.New(body.Error.Detail)
		}
		return nil, fmt.Errorf("ingest answered %s: %s", reply.Header.Get("Status-Code"), reply.Data)
	}
	var acc ingest.Accepted
	if err := json.Unmarshal(reply.Data, &acc); err != nil {
		return nil, fmt.Errorf("ingest's reply: %w", err)
	}
	return acc.Jobs, nil
}

// controlRequests appends cancel, hold and resume requests through the executor's
// control API, recording who asked.
type controlRequests struct{ api executor.ControlAPI }

func (c controlRequests) Request(ctx context.Context, jobID string, name events.Name, reason, principal string) error {
	_, err := c.api.Request(httpapi.WithPrincipal(ctx, principal), jobID, name, events.Note{Reason: reason})
	var apiErr *httpapi.Error
	if errors.As(err, &apiErr) {
		return errors.New(apiErr.Detail)
	}
	return err
}

// ptpDeps wires the endpoint: its own connection for the log and submissions, and the
// executor's store for control requests, which are the executor's to record.
func (s *system) ptpDeps(auth *httpapi.Auth) (ptp.Deps, error) {
	c, err := s.connect("ptp")
	if err != nil {
		return ptp.Deps{}, err
	}
	ctl, err := s.connect("executor")
	if err != nil {
		return ptp.Deps{}, err
	}
	return ptp.Deps{JS: c.js, Submit: natsSubmitter{c.nc}, Control: controlRequests{executor.ControlAPI{Store: ctl.store}},
		Auth: auth, Logger: s.log}, nil
}

// startPTP runs the PTP endpoint for many sessions on ln in g.
func (s *system) startPTP(ctx context.Context, g *errgroup.Group, ln net.Listener) error {
	deps, err := s.ptpDeps(s.auth)
	if err != nil {
		ln.Close()
		return err
	}
	svc, err := ptp.New(ctx, ptp.Config{Clusters: s.cfg.Clusters}, deps)
	if err != nil {
		ln.Close()
		return err
	}
	g.Go(func() error { return svc.RunListener(ctx, ln) })
	return nil
}

type ptpProxyFlags struct {
	bus    busFlags
	proxy  string
	host   string
	port   int
	server string
	token  string
	debug  int
}

// ptpProxyCmd is the program Eclipse PTP launches: `--proxy=tcp --host=H --port=P`
// connects back to the Eclipse that listens there (or `--proxy=stdio` talks on standard
// input and output) and serves one session, relayed to a `serve --ptp-listen` endpoint
// (--server) or served here from the NATS cluster (--nats-url).
func ptpProxyCmd(e *env) *cobra.Command {
	f := &ptpProxyFlags{}
	cmd := &cobra.Command{
		Use:   "ptp-proxy --proxy=tcp --host=H --port=P [--server ADDR | --nats-url URL]",
		Short: "serve one Eclipse PTP session, as PTP launches a resource-manager proxy",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runPTPProxy(cmd.Context(), e, f)
		},
	}
	f.bus.register(cmd.Flags(), e)
	fs := cmd.Flags()
	fs.StringVar(&f.proxy, "proxy", "tcp", "tcp (connect back to --host:--port) or stdio")
	fs.StringVar(&f.host, "host", "", "the host Eclipse listens on")
	fs.IntVar(&f.port, "port", 0, "the port Eclipse listens on")
	fs.StringVar(&f.server, "server", e.getenv("GRIDWIRE_PTP_SERVER"), "address of a `serve --ptp-listen` endpoint to relay the session to (host:port or tcp://host:port)")
	fs.StringVar(&f.token, "token", "", "API token for an endpoint that has tokens configured (default $GRIDWIRE_TOKEN)")
	f.token = e.getenv("GRIDWIRE_TOKEN") // after the flag is made: --help never prints it
	fs.IntVar(&f.debug, "debug", 0, "PTP's debug level (accepted; gridwire logs with --log-level)")
	return cmd
}

func runPTPProxy(ctx context.Context, e *env, f *ptpProxyFlags) error {
	if (f.server == "") == (f.bus.natsURL == "") {
		return errors.New("ptp-proxy: give exactly one of --server (a serve --ptp-listen address) or --nats-url")
	}
	client, err := ptpClientConn(f, e)
	if err != nil {
		return err
	}
	defer client.Close()
	if f.server != "" {
		return relayPTP(ctx, client, f)
	}
	return servePTPHere(ctx, e, f, client)
}

// stdio is standard input and output as one connection.
type stdio struct {
	io.Reader
	io.Writer
}

func (stdio) Close() error { return nil }

func ptpClientConn(f *ptpProxyFlags, e *env) (io.ReadWriteCloser, error) {
	switch f.proxy {
	case "stdio":
		return stdio{e.stdin, e.stdout}, nil
	case "tcp":
		if f.host == "" || f.port <= 0 || f.port > 65535 {
			return nil, fmt.Errorf("ptp-proxy --proxy=tcp needs --host and --port (got %q, %d)", f.host, f.port)
		}
		addr := net.JoinHostPort(f.host, strconv.Itoa(f.port))
		c, err := net.DialTimeout("tcp", addr, 30*time.Second)
		if err != nil {
			return nil, fmt.Errorf("ptp-proxy: connecting back to Eclipse at %s: %w", addr, err)
		}
		return c, nil
	}
	return nil, fmt.Errorf("ptp-proxy: --proxy=%s: want tcp or stdio", f.proxy)
}

// relayPTP copies the session both ways between Eclipse and the endpoint.
func relayPTP(ctx context.Context, client io.ReadWriteCloser, f *ptpProxyFlags) error {
	addr := strings.TrimPrefix(f.server, "tcp://")
	var d net.Dialer
	d.Timeout = 30 * time.Second
	srv, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("ptp-proxy: connecting to %s: %w", addr, err)
	}
	defer srv.Close()
	if f.token != "" {
		if _, err := io.WriteString(srv, ptp.TokenLine+f.token+"\n"); err != nil {
			return err
		}
	}
	stop := context.AfterFunc(ctx, func() { _ = srv.Close(); _ = client.Close() })
	defer stop()
	var once sync.Once
	done := make(chan error, 2)
	pipe := func(dst io.Writer, src io.Reader) {
		_, err := io.Copy(dst, src)
		once.Do(func() { _ = srv.Close(); _ = client.Close() })
		done <- err
	}
	go pipe(srv, client)
	go pipe(client, srv)
	<-done
	<-done
	return nil
}

// servePTPHere serves the session from the NATS cluster in this process.
func servePTPHere(ctx context.Context, e *env, f *ptpProxyFlags, client io.ReadWriteCloser) error {
	sys, err := openSystem(ctx, e, &f.bus, false)
	if err != nil {
		return err
	}
	defer sys.close()
	deps, err := sys.ptpDeps(nil)
	if err != nil {
		return err
	}
	svc, err := ptp.New(ctx, ptp.Config{Clusters: sys.cfg.Clusters}, deps)
	if err != nil {
		return err
	}
	g, gctx := errgroup.WithContext(ctx)
	sctx, cancel := context.WithCancel(gctx)
	g.Go(func() error { return svc.Run(sctx) })
	g.Go(func() error {
		defer cancel()
		return svc.Serve(sctx, client, "eclipse")
	})
	return g.Wait()
}
