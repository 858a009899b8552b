// Package bus connects gridwire to NATS: it starts an embedded nats-server with
// JetStream and a file store in a data directory, or connects to an external server
// or cluster by URL. Both paths hand back the same *nats.Conn and jetstream.JetStream,
// so nothing above this package knows which one it got.
//
// It owns the connection and the embedded server's life; it does not own streams,
// subjects or events (package events does).
package bus

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// ErrNoTarget is returned when a Config names neither a data directory nor a URL.
var ErrNoTarget = errors.New("bus: config needs a data directory (embedded) or a NATS URL")

// Config says where the bus is. The zero value is not usable: set DataDir for an
// embedded server or URL for an external one.
type Config struct {
	// DataDir holds the embedded server's JetStream file store. Ignored when URL is set.
	DataDir string
	// Listen, when set (e.g. "127.0.0.1:4222"), makes the embedded server also accept
	// TCP clients, so separate processes can join; port 0 picks a free port. Empty means
	// in-process only.
	Listen string
	// URL of an external server or cluster (comma-separated seeds). Wins over DataDir.
	URL string
	// CredsFile is a NATS credentials file for URL; User/Password or Token otherwise.
	CredsFile string
	User      string
	Password  string
	Token     string
	// Name is the client connection name shown by the server.
	Name string
	// SyncAlways makes the embedded server fsync every write (slower, survives power loss).
	SyncAlways bool
}

// Validate reports whether the config names somewhere to connect to.
func (c Config) Validate() error {
	if c.URL == "" && c.DataDir == "" {
		return ErrNoTarget
	}
	if c.Listen != "" {
		if _, _, err := net.SplitHostPort(c.Listen); err != nil {
			return fmt.Errorf("bus: listen address %q: %w", c.Listen, err)
		}
	}
	return nil
}

// Bus is a live connection, and the embedded server behind it when there is one.
type Bus struct {
	Conn *nats.Conn
	JS   jetstream.JetStream

	server    *server.Server
	closeOnce sync.Once
}

// Open starts or connects to NATS as the config says.
func Open(ctx context.Context, cfg Config) (*Bus, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.URL != "" {
		return connectExternal(ctx, cfg)
	}
	return startEmbedded(cfg)
}

func startEmbedded(cfg Config) (*Bus, error) {
	store := filepath.Join(cfg.DataDir, "jetstream")
	if err := os.MkdirAll(store, 0o750); err != nil {
		return nil, fmt.Errorf("bus: creating store directory: %w", err)
	}
	opts := &server.Options{
		ServerName:         "gridwire-embedded",
		JetStream:          true,
		StoreDir:           store,
		NoSigs:             true,
		NoLog:              true,
		DontListen:         cfg.Listen == "",
		SyncAlways:         cfg.SyncAlways,
		JetStreamMaxMemory: 256 << 20,
		MaxPayload:         8 << 20,
	}
	if cfg.Listen != "" {
		host, port, _ := net.SplitHostPort(cfg.Listen)
		p, err := strconv.Atoi(port)
		if err != nil {
			return nil, fmt.Errorf("bus: listen port %q: %w", port, err)
		}
		if p == 0 {
			p = server.RANDOM_PORT
		}
		opts.Host, opts.Port = host, p
	}
	s, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("bus: configuring embedded server: %w", err)
	}
	go s.Start()
	if !s.ReadyForConnections(30 * time.Second) {
		s.Shutdown()
		return nil, errors.New("bus: embedded server did not become ready within 30s")
	}
	nc, err := nats.Connect("", nats.InProcessServer(s), nats.Name(nameOr(cfg.Name)),
		nats.MaxReconnects(-1))
	if err != nil {
		s.Shutdown()
		return nil, fmt.Errorf("bus: connecting in-process: %w", err)
	}
	b, err := wrap(nc)
	if err != nil {
		s.Shutdown()
		return nil, err
	}
	b.server = s
	return b, nil
}

func connectExternal(ctx context.Context, cfg Config) (*Bus, error) {
	opts := []nats.Option{nats.Name(nameOr(cfg.Name)), nats.MaxReconnects(-1),
		nats.RetryOnFailedConnect(false)}
	switch {
	case cfg.CredsFile != "":
		opts = append(opts, nats.UserCredentials(cfg.CredsFile))
	case cfg.Token != "":
		opts = append(opts, nats.Token(cfg.Token))
	case cfg.User != "":
		opts = append(opts, nats.UserInfo(cfg.User, cfg.Password))
	}
	var nc *nats.Conn
	var err error
	for attempt := 0; ; attempt++ {
		nc, err = nats.Connect(cfg.URL, opts...)
		if err == nil {
			break
		}
		if attempt >= 20 {
			return nil, fmt.Errorf("bus: connecting to %s: %w", cfg.URL, err)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
	return wrap(nc)
}

func wrap(nc *nats.Conn) (*Bus, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("bus: jetstream context: %w", err)
	}
	return &Bus{Conn: nc, JS: js}, nil
}

// Connect opens another client connection to the same bus: in-process for an
// embedded server, by URL otherwise. Services that should fail independently use it.
func (b *Bus) Connect(name string) (*nats.Conn, error) {
	if b.server != nil {
		return nats.Connect("", nats.InProcessServer(b.server), nats.Name(name), nats.MaxReconnects(-1))
	}
	return nats.Connect(b.Conn.ConnectedUrl(), nats.Name(name), nats.MaxReconnects(-1))
}

// ClientURL is the address TCP clients may use, or "" for an in-process-only server.
func (b *Bus) ClientURL() string {
	if b.server == nil {
		return b.Conn.ConnectedUrl()
	}
	if b.server.Addr() == nil {
		return ""
	}
	return b.server.ClientURL()
}

// Embedded reports whether this Bus runs its own server.
func (b *Bus) Embedded() bool { return b.server != nil }

// Close drains the connection and shuts the embedded server down. It is idempotent.
func (b *Bus) Close() {
	b.closeOnce.Do(func() {
		_ = b.Conn.Drain()
		deadline := time.Now().Add(5 * time.Second)
		for !b.Conn.IsClosed() && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		b.Conn.Close()
		if b.server != nil {
			b.server.Shutdown()
			b.server.WaitForShutdown()
		}
	})
}

func nameOr(n string) string {
	if n == "" {
		return "gridwire"
	}
	return n
}
