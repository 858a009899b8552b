package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/pkg/bus"
	"github.com/gridwire/gridwire/pkg/cluster"
	"github.com/gridwire/gridwire/pkg/dirlock"
	"github.com/gridwire/gridwire/pkg/httpapi"
	"github.com/gridwire/gridwire/pkg/taskcred"
	"github.com/gridwire/gridwire/services/executor"
	"github.com/gridwire/gridwire/services/incarnator"
	"github.com/gridwire/gridwire/services/ingest"
	"github.com/gridwire/gridwire/services/property"
	"github.com/gridwire/gridwire/services/readside"
	"github.com/gridwire/gridwire/services/stager"
	"github.com/gridwire/gridwire/services/watcher"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/pflag"
	"golang.org/x/sync/errgroup"
)

// busFlags say where NATS is and where local data lives.
type busFlags struct {
	data       string
	natsURL    string
	natsListen string
	creds      string
	user       string
	password   string
	token      string
	caFile     string
	certFile   string
	keyFile    string
	replicas   int
	config     string
	clusters   []string
	logLevel   string
	// signingKeys is the directory of this process's role keys (see keyset).
	signingKeys string
	// allowRootJobs lets fork clusters without run_as run jobs as root when gridwire
	// itself runs as root: the operator's explicit consent (make run gives it).
	allowRootJobs bool
	// stateCacheMiB bounds the memory of the process's cache of folded job states.
	stateCacheMiB int
}

func (f *busFlags) register(fs *pflag.FlagSet, e *env) {
	fs.StringVar(&f.data, "data", "", "data directory (embedded NATS store, local job directories); default $GRIDWIRE_DATA or ./.gridwire-data")
	fs.StringVar(&f.natsURL, "nats-url", "", "external NATS server or cluster URL (default $GRIDWIRE_NATS_URL); empty runs NATS embedded")
	fs.StringVar(&f.natsListen, "nats-listen", "", "with embedded NATS, also accept TCP clients here (e.g. 127.0.0.1:4222)")
	fs.StringVar(&f.creds, "nats-creds", e.getenv("GRIDWIRE_NATS_CREDS"), "NATS credentials file for --nats-url")
	fs.StringVar(&f.user, "nats-user", e.getenv("GRIDWIRE_NATS_USER"), "NATS user: for --nats-url, or the one user --nats-listen accepts")
	fs.StringVar(&f.password, "nats-password", "", "NATS password (better: $GRIDWIRE_NATS_PASSWORD, not seen in ps)")
	fs.StringVar(&f.token, "nats-token", "", "NATS token instead of a user (better: $GRIDWIRE_NATS_TOKEN)")
	fs.StringVar(&f.caFile, "nats-ca", e.getenv("GRIDWIRE_NATS_CA"), "CA certificate that signed the NATS servers' certificates (TLS)")
	fs.StringVar(&f.certFile, "nats-cert", e.getenv("GRIDWIRE_NATS_CERT"), "client certificate, when the NATS servers verify clients")
	fs.StringVar(&f.keyFile, "nats-key", e.getenv("GRIDWIRE_NATS_KEY"), "client certificate's key")
	fs.IntVar(&f.replicas, "nats-replicas", 0, "replicas of JOBS and every KV bucket; 0: 3 on a cluster of 3 or more servers, else 1")
	fs.StringVar(&f.config, "config", e.getenv("GRIDWIRE_CONFIG"), "YAML config naming the clusters; default: one local fork cluster")
	fs.StringSliceVar(&f.clusters, "cluster", nil, "clusters this process serves (executor, watcher); default all")
	fs.StringVar(&f.logLevel, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&f.signingKeys, "signing-keys", e.getenv("GRIDWIRE_SIGNING_KEYS"),
		"directory of this host's event signing keys (one nkey seed per role); default the config's signing.keys_dir, else <data>/keys")
	fs.BoolVar(&f.allowRootJobs, "allow-root-jobs", e.getenv("GRIDWIRE_ALLOW_ROOT_JOBS") == "1",
		"when gridwire runs as root, let fork clusters without run_as run jobs as root (default: refuse to start them)")
	fs.IntVar(&f.stateCacheMiB, "state-cache-mib", 256,
		"memory for the folded job states this process keeps (least recently used go first; 0: none kept)")
	if f.data == "" {
		f.data = e.getenv("GRIDWIRE_DATA")
	}
	// Secrets, and a URL that may carry them (nats://user:pass@host), are taken from the
	// environment after the flags are made: --help, which prints defaults, never shows them.
	f.natsURL = e.getenv("GRIDWIRE_NATS_URL")
	f.password = e.getenv("GRIDWIRE_NATS_PASSWORD")
	f.token = e.getenv("GRIDWIRE_NATS_TOKEN")
}

// busConfig is where the flags say NATS is, and how to prove who this process is.
func (f *busFlags) busConfig(data string) bus.Config {
	return bus.Config{DataDir: data, URL: f.natsURL, Listen: f.natsListen, CredsFile: f.creds,
		User: f.user, Password: f.password, Token: f.token, CAFile: f.caFile, CertFile: f.certFile,
		KeyFile: f.keyFile, Name: "gridwire"}
}

// system is one process's wiring: the bus, the config and the services it runs.
type system struct {
	bus      *bus.Bus
	cfg      cluster.Config
	data     string
	log      *slog.Logger
	host     string
	auth     *httpapi.Auth // the config's API tokens
	lock     *dirlock.Lock // the data directory, while this process runs NATS in it
	replicas int
	ingest   *ingest.Service
	conns    []*nats.Conn
	cache    *events.StateCache // shared by every service of this process
	// cacheBytes bounds the cache (--state-cache-mib): < 0 keeps no state, 0 the
	// default bound.
	cacheBytes int64
	// keys sign what this process's services append; nil until first needed (keyring).
	keys *keyset
	// wrapJS, when set, wraps every service's JetStream client, and publishFault
	// reaches the appends every service's store sends on its own connection (the fault
	// tests put pkg/natsfault there); nil in every command.
	wrapJS       func(jetstream.JetStream) jetstream.JetStream
	publishFault events.PublishFault
	// stager is the config's stager section, read and validated when the config is.
	stager stager.Config
	// own are this process's listening addresses, which staging never reaches.
	own []string
	// protected are the paths staging never touches: data, config, credentials.
	protected []string
	// listener, when set, is where the read side serves this process's HTTP API: the
	// routes of mux (its own, and those the other services of the process offer).
	listener net.Listener
	mux      *http.ServeMux
	metrics  *prometheus.Registry // every service's metrics, served by the read side
	// allowRootJobs is --allow-root-jobs: fork clusters without run_as may run jobs as
	// root (allow_root) when this process is root.
	allowRootJobs bool
	// taskKey is the key of task credentials, read once (taskCredentials).
	taskKey *taskcred.Key
	// taskAPI, for an executor run alone, is the HTTP address (host:port) of a gateway
	// process serving the task API, which this machine reaches (--task-api).
	taskAPI string
}

func openSystem(ctx context.Context, e *env, f *busFlags, needBus bool) (*system, error) {
	cfg, err := cluster.Load(f.config)
	if err != nil {
		return nil, err
	}
	stg, err := stagerSection(cfg)
	if err != nil {
		return nil, err
	}
	data := firstOf(f.data, cfg.DataDir, ".gridwire-data")
	if data, err = filepath.Abs(data); err != nil {
		return nil, err
	}
	if !needBus && f.natsURL == "" {
		return nil, usageErrorf("a service alone needs --nats-url (or GRIDWIRE_NATS_URL) to reach the others")
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(f.logLevel)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	log := slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: level}))
	auth, err := httpapi.NewAuth(cfg.Tokens)
	if err != nil {
		return nil, cfg.Locate(err)
	}
	if f.replicas < 0 || f.replicas > 5 {
		return nil, usageErrorf("--nats-replicas %d: JetStream allows 1 to 5 (0 picks by the cluster's size)", f.replicas)
	}
	// The flags' own mistakes (a listener without credentials, half a client
	// certificate) are refused before the data directory is locked or made.
	if err := f.busConfig(data).Validate(); err != nil {
		detail := err.Error()
		if errors.Is(err, bus.ErrListenNeedsAuth) {
			detail = fmt.Sprintf("--nats-listen %s: %v: set --nats-user and $GRIDWIRE_NATS_PASSWORD, or $GRIDWIRE_NATS_TOKEN", f.natsListen, err)
		}
		return nil, &cliError{code: "usage", exit: exitUsage, err: err, detail: detail}
	}
	// Read before anything is opened or made: a bad key refuses the start with nothing
	// written (openKeyset only reads).
	keys, err := openKeyset(f.keysDir(cfg, data), cfg, log)
	if err != nil {
		return nil, err
	}
	var lock *dirlock.Lock
	if f.natsURL == "" {
		// The embedded server's store must have one writer: a second process on it
		// would corrupt the log, so it is refused before anything is opened.
		if lock, err = dirlock.Acquire(data); err != nil {
			return nil, fmt.Errorf("data directory %s: %w; stop the other gridwire or choose another --data", data, err)
		}
	}
	b, err := bus.Open(ctx, f.busConfig(data))
	if err != nil {
		lock.Release()
		return nil, err
	}
	n := replicas(b, f.replicas)
	if _, err := events.Provision(ctx, b.JS, events.StreamOptions{Replicas: n}); err != nil {
		b.Close()
		lock.Release()
		return nil, err
	}
	host, _ := os.Hostname()
	sys := &system{bus: b, cfg: cfg, data: data, log: log, auth: auth, host: fmt.Sprintf("%s-%d", host, os.Getpid()), stager: stg,
		protected: []string{data, cfg.Path, f.creds, f.caFile, f.certFile, f.keyFile}, lock: lock, replicas: n,
		allowRootJobs: f.allowRootJobs, cacheBytes: -1, keys: keys}
	if f.stateCacheMiB > 0 {
		sys.cacheBytes = int64(f.stateCacheMiB) << 20
	}
	if f.natsListen != "" {
		sys.own = append(sys.own, f.natsListen)
	}
	return sys, nil
}

// stagerSection reads the config's stager section strictly and validates it.
func stagerSection(cfg cluster.Config) (stager.Config, error) {
	var sc stager.Config
	if err := cfg.DecodeSection("stager", cfg.Stager, &sc); err != nil {
		return sc, err
	}
	if err := sc.Validate(); err != nil {
		return sc, cfg.Locate(err)
	}
	return sc, nil
}

// replicas is the flag's count, else 3 on a cluster of at least three servers (the
// servers a client learns of are the cluster's), else 1.
func replicas(b *bus.Bus, flag int) int {
	switch {
	case flag > 0:
		return flag
	case b.Embedded():
		return 1
	case len(b.Conn.Servers()) >= 3:
		return 3
	}
	return 1
}

// conn is one service's own connection to the bus: services fail, reconnect and flow
// independently, and no service's traffic queues behind another's.
type conn struct {
	nc    *nats.Conn
	js    jetstream.JetStream
	store *events.Store
}

func (s *system) connect(service string) (conn, error) { return s.connectFor(service, "") }

// connectFor is connect for a service that works for one cluster only: its store signs
// with that cluster's key when there is one (an executor of hpc1 only may hold only
// executor-hpc1.seed).
func (s *system) connectFor(service, clusterName string) (conn, error) {
	nc, err := s.bus.Connect("gridwire-" + service)
	if err != nil {
		return conn{}, fmt.Errorf("connecting %s: %w", service, err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return conn{}, err
	}
	if s.wrapJS != nil {
		js = s.wrapJS(js)
	}
	s.conns = append(s.conns, nc)
	if s.cache == nil {
		switch {
		case s.cacheBytes < 0:
			s.cache = events.NewStateCache(0) // --state-cache-mib 0: no state kept
		case s.cacheBytes == 0:
			s.cache = events.NewBoundedStateCache(1<<16, 256<<20)
		default:
			s.cache = events.NewBoundedStateCache(1<<16, s.cacheBytes)
		}
	}
	c := conn{nc: nc, js: js}
	if c.store, err = s.store(c, service, clusterName); err != nil {
		nc.Close()
		return conn{}, err
	}
	return c, nil
}

// roles are the signing roles of the services that append events; the others (the
// read side, PTP's log reader) append nothing and sign nothing.
var roles = map[string]events.Role{"ingest": events.RoleIngest, "incarnator": events.RoleIncarnator,
	"stager": events.RoleStager, "executor": events.RoleExecutor, "watcher": events.RoleWatcher}

// store is a service's event store on c, signing with its role's key (for an executor
// of one cluster, that cluster's key when there is one).
func (s *system) store(c conn, service, clusterName string) (*events.Store, error) {
	opts := []events.StoreOption{events.WithSharedCache(s.cache)}
	if role, ok := roles[service]; ok {
		ks, err := s.keyring()
		if err != nil {
			return nil, err
		}
		key, err := ks.signer(role, clusterName)
		if err != nil {
			return nil, err
		}
		opts = append(opts, events.WithSigningKey(key))
	}
	if s.publishFault != nil {
		opts = append(opts, events.WithPublishFaults(s.publishFault))
	}
	return events.NewStore(c.nc, c.js, "gridwire/"+service+"/"+s.host, opts...), nil
}

// keyring is the process's keyset, read from <data>/keys when openSystem did not.
func (s *system) keyring() (*keyset, error) {
	if s.keys == nil {
		ks, err := openKeyset(filepath.Join(s.data, "keys"), s.cfg, s.log)
		if err != nil {
			return nil, err
		}
		s.keys = ks
	}
	return s.keys, nil
}

// close drains every service connection; the bus itself is closed by its owner.
func (s *system) close() {
	for _, nc := range s.conns {
		_ = nc.Drain()
	}
	s.bus.Close()
	s.lock.Release()
}

// clusters returns the configured clusters this process serves.
func (s *system) clusters(only []string) ([]cluster.Cluster, error) {
	if len(only) == 0 {
		return s.cfg.Clusters, nil
	}
	var out []cluster.Cluster
	for _, name := range only {
		cl, ok := s.cfg.Find(name)
		if !ok {
			return nil, fmt.Errorf("--cluster %s: not in the config", name)
		}
		out = append(out, cl)
	}
	return out, nil
}

// allServices in start order: the read side last, so the routes of the others are in
// its mux before it serves.
var allServices = []string{"ingest", "incarnator", "stager", "executor", "watcher", "readside"}

// routes is the process's HTTP mux, holding the routes of the services started so far.
func (s *system) routes() *http.ServeMux {
	if s.mux == nil {
		s.mux = http.NewServeMux()
		s.mux.HandleFunc("GET /v1/version", serveVersion)
		s.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	}
	return s.mux
}

// registry holds the metrics of every service of the process.
func (s *system) registry() *prometheus.Registry {
	if s.metrics == nil {
		s.metrics = prometheus.NewRegistry()
		s.metrics.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	return s.metrics
}

// start runs the named services in g.
func (s *system) start(ctx context.Context, g *errgroup.Group, names []string, only []string) error {
	clusters, err := s.clusters(only)
	if err != nil {
		return err
	}
	starters := map[string]starter{"ingest": s.startIngest, "incarnator": s.startIncarnator, "stager": s.startStager,
		"executor": s.startExecutor, "watcher": s.startWatcher, "readside": s.startReadside}
	for _, name := range names {
		run, ok := starters[name]
		if !ok {
			return fmt.Errorf("unknown service %q (one of %v)", name, allServices)
		}
		one := ""
		if len(clusters) == 1 {
			one = clusters[0].Name
		}
		c, err := s.connectFor(name, one)
		if err != nil {
			return err
		}
		if err := run(ctx, g, c, s.log.With("service", name), clusters); err != nil {
			return err
		}
	}
	return nil
}

// starter starts one service in g on its connection c, for the clusters this process
// serves.
type starter func(ctx context.Context, g *errgroup.Group, c conn, log *slog.Logger, clusters []cluster.Cluster) error

func (s *system) startIngest(ctx context.Context, g *errgroup.Group, c conn, log *slog.Logger, _ []cluster.Cluster) error {
	deps := ingest.Deps{Conn: c.nc, Store: c.store, Events: c.store, Sessions: c.store, Auth: s.auth, Logger: log, Now: time.Now, Check: s.stager.CheckURLs,
		Keys: ingest.KVKeys{JS: c.js}}
	var err error
	if s.ingest, err = ingest.New(ingest.Config{}, deps); err != nil {
		return err
	}
	s.ingest.Routes(s.routes())
	stager.UploadAPI{JS: s.bus.JS}.Routes(s.routes())
	g.Go(func() error { return ingest.Run(ctx, ingest.Config{}, deps) })
	return nil
}

func (s *system) startIncarnator(ctx context.Context, g *errgroup.Group, c conn, log *slog.Logger, _ []cluster.Cluster) error {
	profiles, err := incarnator.LoadProfiles(s.cfg.ProfileDir)
	if err != nil {
		return err
	}
	planner, err := incarnator.NewPlanner(s.cfg, profiles, filepath.Join(s.data, "jobs"))
	if err != nil {
		return s.cfg.Locate(err)
	}
	g.Go(func() error {
		return incarnator.Run(ctx, incarnator.Config{Workers: 32},
			incarnator.Deps{JS: c.js, Store: c.store, Planner: planner, Logger: log, Now: time.Now})
	})
	return nil
}

func (s *system) startStager(ctx context.Context, g *errgroup.Group, c conn, log *slog.Logger, _ []cluster.Cluster) error {
	cfg := s.stagerConfig()
	g.Go(func() error {
		return stager.Run(ctx, cfg, stager.Deps{JS: c.js, Store: c.store, Logger: log, Now: time.Now})
	})
	return nil
}

func (s *system) startExecutor(ctx context.Context, g *errgroup.Group, c conn, log *slog.Logger, clusters []cluster.Cluster) error {
	// Cancel, hold and resume are the executor's to carry out, and so its to record.
	executor.ControlAPI{Store: c.store}.Routes(s.routes())
	props, err := s.propertyAPI(ctx)
	if err != nil {
		return err
	}
	for _, cl := range clusters {
		if s.allowRootJobs && cl.Kind == cluster.KindFork && cl.RunAs == "" {
			cl.AllowRoot = true
		}
		cfg := executor.Config{Cluster: cl, ID: s.host, Workers: 32}
		if cl.Retention != nil {
			if cfg.WorkRoot, err = s.workRoot(cl); err != nil {
				return err
			}
		}
		store, err := s.store(c, "executor", cl.Name)
		if err != nil {
			return err
		}
		g.Go(func() error {
			return executor.Run(ctx, cfg, executor.Deps{JS: c.js, Conn: c.nc, Store: store, Logger: log, Now: time.Now,
				Properties: props})
		})
	}
	return nil
}

// workRoot is where the incarnator makes the cluster's job directories, the one place
// the executor's retention removes them from.
func (s *system) workRoot(cl cluster.Cluster) (string, error) {
	profiles, err := incarnator.LoadProfiles(s.cfg.ProfileDir)
	if err != nil {
		return "", err
	}
	return incarnator.WorkRoot(cl, profiles, filepath.Join(s.data, "jobs"))
}

func (s *system) startWatcher(ctx context.Context, g *errgroup.Group, c conn, log *slog.Logger, clusters []cluster.Cluster) error {
	probers, closeProbers, err := s.probers(clusters, c.store.State, log)
	if err != nil {
		return err
	}
	// The registry is made here, not in the goroutine: the read side, started next, must
	// serve the same one (two made at once would each hold half the metrics).
	deps := watcher.Deps{JS: c.js, Conn: c.nc, Store: c.store, Logger: log, Now: time.Now, Probers: probers, Metrics: s.registry()}
	g.Go(func() error {
		defer closeProbers()
		return watcher.Run(ctx, watcher.Config{Clusters: clusters}, deps)
	})
	return nil
}

// propertyAPI is what the executor hands DDS tasks to reach the task-side property API:
// this process's HTTP listener, which serves it (or, for an executor run alone, the
// gateway --task-api names), and their credentials. Without either it hands them nothing.
func (s *system) propertyAPI(ctx context.Context) (*executor.Properties, error) {
	addr := s.taskAPI
	if s.listener != nil {
		addr = s.listener.Addr().String()
	}
	if addr == "" {
		return nil, nil
	}
	key, err := s.taskCredentials(ctx)
	if err != nil {
		return nil, fmt.Errorf("the task API's credentials: %w", err)
	}
	return &executor.Properties{Addr: addr, Credential: key.Issue}, nil
}

// taskCredentials is the key every gateway process issues and checks task credentials
// with, kept in the bus.
func (s *system) taskCredentials(ctx context.Context) (taskcred.Key, error) {
	if s.taskKey == nil {
		// As every bucket at start: a cluster still electing its leaders (a cold
		// restart) is waited for, not a reason to stop.
		key, err := events.Ensure(ctx, func(ctx context.Context) (taskcred.Key, error) {
			return taskcred.Open(ctx, s.bus.JS, s.replicas)
		})
		if err != nil {
			return key, err
		}
		s.taskKey = &key
	}
	return *s.taskKey, nil
}

// startReadside starts the read side, which serves the process's HTTP API (when this
// process has a listener) with the routes the services started before it registered,
// and the task-side property API with the live view of properties it reads from.
func (s *system) startReadside(ctx context.Context, g *errgroup.Group, c conn, log *slog.Logger, _ []cluster.Cluster) error {
	key, err := s.taskCredentials(ctx)
	if err != nil {
		return err
	}
	// What tasks set comes in like a submission: signed with the ingest role's key.
	store, err := s.store(c, "ingest", "")
	if err != nil {
		return err
	}
	props, err := property.New(property.Config{}, property.Deps{JS: c.js, Store: store, Key: key,
		Logger: log.With("part", "properties"), Now: time.Now})
	if err != nil {
		return err
	}
	props.Routes(s.routes())
	g.Go(func() error { return props.Run(ctx) })
	deps := readside.Deps{JS: c.js, Store: c.store, Logger: log, Metrics: s.registry(),
		HTTP: readside.HTTP{Listener: s.listener, Mux: s.routes(), Wrap: s.auth.Middleware}}
	g.Go(func() error { return readside.Run(ctx, readside.Config{Clusters: s.cfg.Clusters}, deps) })
	return nil
}

// stagerConfig is the config's stager section with what only this process knows: the
// clusters, the paths no staging may touch and the listeners it may not reach.
func (s *system) stagerConfig() stager.Config {
	cfg := s.stager
	if cfg.Workers == 0 {
		cfg.Workers = 32
	}
	cfg.Clusters = s.cfg
	for _, p := range s.protected {
		if p != "" {
			abs, err := filepath.Abs(p)
			if err == nil {
				cfg.Protected = append(cfg.Protected, abs)
			}
		}
	}
	cfg.HTTP.Own = append(cfg.HTTP.Own, s.own...)
	return cfg
}

// vetJob is what ingest checks of every parsed job before anything is appended: that
// the stager can move every file it names (schemes, confinement). The services check with
// their config's stager section (its transfer plugins add schemes); vetJob is the check
// with none.
func vetJob(j events.Job) error { return stager.CheckURLs(j) }

func firstOf(vals ...string) string {
	if i := slices.IndexFunc(vals, func(v string) bool { return v != "" }); i >= 0 {
		return vals[i]
	}
	return ""
}
