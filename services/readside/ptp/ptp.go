// Package ptp is gridwire's Eclipse PTP resource-manager proxy endpoint: a reader of the
// job log that shows gridwire to a PTP client as a resource manager (machines are
// clusters, queues their queues, nodes their hosts, jobs gridwire's jobs, processes one
// per rank), and two ways in, SUBMIT_JOB and TERMINATE_JOB (plus hold and resume where
// the protocol has room), which go to ingest and to the control owner like every other
// request. It speaks both wire forms of package ptpwire, telling them apart by the
// first bytes a client sends.
//
// It owns the model mapping and sessions. It does not parse job descriptions (ingest
// reads the SUBMIT_JOB attribute list), decide job states (the log does) or carry out
// cancels (the executor does).
package ptp

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/pkg/cluster"
	"github.com/gridwire/gridwire/pkg/httpapi"
	"github.com/nats-io/nats.go/jetstream"
)

// Config is the endpoint's plain configuration. The zero value is valid: no listener
// (sessions come through Serve).
type Config struct {
	// Listen is a TCP address for many sessions ("127.0.0.1:7790"); empty: none. Beyond
	// loopback it needs tokens (Deps.Auth), and every connection then opens with the
	// line "GRIDWIRE-TOKEN <token>\n" before the protocol's first byte.
	Listen string
	// Clusters are the machines shown.
	Clusters []cluster.Cluster
	// MaxChanges bounds the model changes kept for sessions that fall behind; 0 means
	// 1<<20. A session further behind is closed with a MESSAGE saying so.
	MaxChanges int
	// MaxFrame bounds one incoming frame; 0 means ptpwire.DefaultMaxFrame.
	MaxFrame int
	// RequestTimeout bounds a submission or a control request; 0 means 30s.
	RequestTimeout time.Duration
}

// Validate reports configuration errors.
func (c Config) Validate() error {
	if c.MaxChanges < 0 || c.MaxFrame < 0 || c.RequestTimeout < 0 {
		return errors.New("ptp: negative limit")
	}
	for _, cl := range c.Clusters {
		if !events.ValidRoute(cl.Name) {
			return fmt.Errorf("ptp: cluster name %q", cl.Name)
		}
	}
	return nil
}

// Submitter hands a SUBMIT_JOB attribute list (a JSON list of strings) to ingest for
// the session's caller, whose grant proves who submits (ingest believes only its
// token), and returns the IDs of the jobs it made.
type Submitter interface {
	Submit(ctx context.Context, doc []byte, file string, caller httpapi.Grant) ([]string, error)
}

// Controller asks the control owner to cancel, hold or resume a job (name is
// events.CancelRequested, HoldRequested or ResumeRequested).
type Controller interface {
	Request(ctx context.Context, jobID string, name events.Name, reason, principal string) error
}

// Deps are the endpoint's live collaborators.
type Deps struct {
	JS      jetstream.JetStream
	Submit  Submitter
	Control Controller
	Auth    *httpapi.Auth // nil: open, loopback only
	Logger  *slog.Logger
}

// Service is one process's endpoint: the model and its sessions.
type Service struct {
	cfg    Config
	deps   Deps
	model  *Model
	static *machines
	log    *slog.Logger
	wg     sync.WaitGroup
}

// New opens the ID bucket and lays out the machines; call Run to follow the log.
func New(ctx context.Context, cfg Config, deps Deps) (*Service, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.MaxChanges == 0 {
		cfg.MaxChanges = 1 << 20
	}
	if cfg.MaxFrame == 0 {
		cfg.MaxFrame = 4 << 20
	}
	if cfg.RequestTimeout == 0 {
		cfg.RequestTimeout = 30 * time.Second
	}
	if deps.Logger == nil {
		deps.Logger = slog.New(slog.DiscardHandler)
	}
	ids, err := openIDs(ctx, deps.JS)
	if err != nil {
		return nil, err
	}
	static, err := layout(ctx, ids, cfg.Clusters)
	if err != nil {
		return nil, err
	}
	log := deps.Logger.With("service", "ptp")
	return &Service{cfg: cfg, deps: deps, static: static, log: log,
		model: newModel(deps.JS, ids, cfg.Clusters, log, cfg.MaxChanges)}, nil
}

// Run follows the log until ctx ends. It returns after every session has closed.
func (s *Service) Run(ctx context.Context) error {
	defer s.wg.Wait()
	return s.model.run(ctx)
}

// Ready is closed once the model has read the log as it was when Run started.
func (s *Service) Ready() <-chan struct{} { return s.model.Ready() }

// Run is the listening endpoint: the model and a TCP listener for many sessions.
func Run(ctx context.Context, cfg Config, deps Deps) error {
	s, err := New(ctx, cfg, deps)
	if err != nil {
		return err
	}
	if cfg.Listen == "" {
		return s.Run(ctx)
	}
	if err := deps.Auth.CheckListen(cfg.Listen); err != nil {
		return fmt.Errorf("ptp: %w", err)
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("ptp: %w", err)
	}
	return s.RunListener(ctx, ln)
}

// RunListener serves sessions accepted from ln while following the log.
func (s *Service) RunListener(ctx context.Context, ln net.Listener) error {
	s.log.Info("ptp endpoint listening", "addr", ln.Addr().String())
	stop := context.AfterFunc(ctx, func() { _ = ln.Close() })
	defer stop()
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return <-done
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			_ = ln.Close()
			<-done
			return fmt.Errorf("ptp: accepting: %w", err)
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			if err := s.Serve(ctx, c, c.RemoteAddr().String()); err != nil {
				s.log.Info("ptp session ended", "remote", c.RemoteAddr().String(), "err", err)
			}
		}()
	}
}

// TokenLine opens a connection to an endpoint that has tokens configured.
const TokenLine = "GRIDWIRE-TOKEN "

// Serve runs one session over conn until the client quits or disconnects or ctx ends,
// then closes conn. Sessions wait for the model to catch up before sending it.
func (s *Service) Serve(ctx context.Context, conn io.ReadWriteCloser, remote string) error {
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { _ = conn.Close() })
	defer stop()
	r := bufio.NewReaderSize(conn, 64<<10)
	grant, err := s.authenticate(r, conn)
	if err != nil {
		return err
	}
	sess := newSession(s, r, conn, remote, grant)
	return sess.run(ctx)
}

// authenticate reads the token line when tokens are configured.
func (s *Service) authenticate(r *bufio.Reader, conn io.ReadWriteCloser) (httpapi.Grant, error) {
	if s.deps.Auth.Open() {
		g, _ := s.deps.Auth.Lookup("")
		return g, nil
	}
	if nc, ok := conn.(net.Conn); ok {
		_ = nc.SetReadDeadline(time.Now().Add(30 * time.Second))
		defer func() { _ = nc.SetReadDeadline(time.Time{}) }()
	}
	tok, err := readToken(r, 4096)
	if err != nil {
		return httpapi.Grant{}, fmt.Errorf("ptp: %w", err)
	}
	g, ok := s.deps.Auth.Lookup(tok)
	if !ok || !g.May(httpapi.PermRead) {
		return httpapi.Grant{}, errors.New("ptp: unknown token or no read permission")
	}
	return g, nil
}

// readToken reads the token line, giving up at the first byte that departs from it.
func readToken(r *bufio.Reader, max int) (string, error) {
	var b strings.Builder
	for b.Len() < max {
		c, err := r.ReadByte()
		if err != nil {
			return "", fmt.Errorf("reading the token line: %w", err)
		}
		if n := b.Len(); n < len(TokenLine) && c != TokenLine[n] {
			return "", errors.New("connection did not open with the token line (tokens are configured)")
		}
		if c == '\n' {
			return strings.TrimSuffix(strings.TrimPrefix(b.String(), TokenLine), "\r"), nil
		}
		b.WriteByte(c)
	}
	return "", fmt.Errorf("token line longer than %d bytes", max)
}
