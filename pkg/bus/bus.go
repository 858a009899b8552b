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
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// ErrNoTarget is returned when a Config names neither a data directory nor a URL.
var ErrNoTarget = errors.New("bus: config needs a data directory (embedded) or a NATS URL")

// ErrListenNeedsAuth is returned when an embedded server would accept TCP clients
// without credentials: anyone who can reach the port could then write the log.
var ErrListenNeedsAuth = errors.New("bus: a NATS listener needs credentials (a user and password, or a token)")

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
	// CredsFile is a NATS credentials file (JWT and nkey seed) for URL; User/Password or
	// Token otherwise. A URL may also carry user:password itself. With Listen, the
	// embedded server requires User/Password or Token of every client, in-process ones
	// included.
	CredsFile string
	User      string
	Password  string
	Token     string
	// CAFile verifies the servers' certificates (a private CA); CertFile and KeyFile are
	// this client's certificate when the servers verify clients.
	CAFile   string
	CertFile string
	KeyFile  string
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
	if c.Listen != "" && c.URL == "" {
		if _, _, err := net.SplitHostPort(c.Listen); err != nil {
			return fmt.Errorf("bus: listen address %q: %w", c.Listen, err)
		}
		if c.Token == "" && (c.User == "" || c.Password == "") {
			return ErrListenNeedsAuth
		}
	}
	if (c.CertFile == "") != (c.KeyFile == "") {
		return errors.New("bus: a client certificate needs both its certificate and its key file")
	}
	return nil
}

// clientOptions are the options every connection of this config uses: credentials and
// TLS, so a service's own connection authenticates exactly as the first one did.
func (c Config) clientOptions() []nats.Option {
	var opts []nats.Option
	switch {
	case c.CredsFile != "":
		opts = append(opts, nats.UserCredentials(c.CredsFile))
	case c.Token != "":
		opts = append(opts, nats.Token(c.Token))
	case c.User != "":
		opts = append(opts, nats.UserInfo(c.User, c.Password))
	}
	if c.CAFile != "" {
		opts = append(opts, nats.RootCAs(c.CAFile))
	}
	if c.CertFile != "" {
		opts = append(opts, nats.ClientCert(c.CertFile, c.KeyFile))
	}
	return opts
}

// Bus is a live connection, and the embedded server behind it when there is one.
type Bus struct {
	Conn *nats.Conn
	JS   jetstream.JetStream

	server    *server.Server
	opts      []nats.Option // credentials and TLS of every connection
	url       string        // the external URL as configured (it may carry user:password)
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

// readyWithin bounds the embedded server's start, recovery of the store included.
const readyWithin = 10 * time.Minute

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
		} else if ln, err := net.Listen("tcp", cfg.Listen); err != nil {
			// Refused here, at once: the server would only log it and never be ready.
			return nil, fmt.Errorf("bus: listening on %s: %w", cfg.Listen, err)
		} else {
			ln.Close()
		}
		opts.Host, opts.Port = host, p
		switch {
		case cfg.Token != "":
			opts.Authorization = cfg.Token
		default:
			opts.Users = []*server.User{{Username: cfg.User, Password: cfg.Password}}
		}
	}
	s, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("bus: configuring embedded server: %w", err)
	}
	go s.Start()
	// A store of millions of messages recovers its streams' subject indexes before the
	// server is ready: a million jobs' log took more than 30 s on two loaded cores.
	if !s.ReadyForConnections(readyWithin) {
		s.Shutdown()
		return nil, fmt.Errorf("bus: embedded server did not become ready within %v", readyWithin)
	}
	copts := cfg.inProcessOptions()
	nc, err := nats.Connect("", append(copts, nats.InProcessServer(s), nats.Name(nameOr(cfg.Name)),
		nats.MaxReconnects(-1))...)
	if err != nil {
		s.Shutdown()
		return nil, fmt.Errorf("bus: connecting in-process: %w", err)
	}
	b, err := wrap(nc)
	if err != nil {
		s.Shutdown()
		return nil, err
	}
	b.server, b.opts = s, copts
	return b, nil
}

// inProcessOptions are the credentials in-process clients of an embedded server give:
// the listener's, when it has one (the server then checks every client).
func (c Config) inProcessOptions() []nats.Option {
	switch {
	case c.Listen == "":
		return nil
	case c.Token != "":
		return []nats.Option{nats.Token(c.Token)}
	default:
		return []nats.Option{nats.UserInfo(c.User, c.Password)}
	}
}

func connectExternal(ctx context.Context, cfg Config) (*Bus, error) {
	// A server that stops answering (frozen, cut off) is given up after about six
	// seconds, not the client default of minutes, and the connection moves to another
	// node of the cluster.
	copts := append(cfg.clientOptions(), nats.PingInterval(2*time.Second), nats.MaxPingsOutstanding(3))
	opts := append([]nats.Option{nats.Name(nameOr(cfg.Name)), nats.MaxReconnects(-1),
		nats.RetryOnFailedConnect(false)}, copts...)
	var nc *nats.Conn
	var err error
	for attempt := 0; ; attempt++ {
		nc, err = nats.Connect(cfg.URL, opts...)
		if err == nil {
			break
		}
		if attempt >= 20 || errors.Is(err, nats.ErrAuthorization) || errors.Is(err, nats.ErrAuthExpired) {
			return nil, fmt.Errorf("bus: connecting to %s: %w", redact(cfg.URL), err)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
	b, err := wrap(nc)
	if err != nil {
		return nil, err
	}
	b.opts, b.url = copts, cfg.URL
	return b, nil
}

// redact hides a password a URL may carry.
func redact(u string) string {
	at := strings.LastIndex(u, "@")
	scheme := strings.Index(u, "://")
	if at < 0 || scheme < 0 || at < scheme {
		return u
	}
	return u[:scheme+3] + "***" + u[at:]
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
// Every connection carries the credentials and TLS settings the bus was opened with.
func (b *Bus) Connect(name string) (*nats.Conn, error) {
	opts := append([]nats.Option{nats.Name(name), nats.MaxReconnects(-1)}, b.opts...)
	if b.server != nil {
		return nats.Connect("", append(opts, nats.InProcessServer(b.server))...)
	}
	return nats.Connect(b.url, opts...)
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
