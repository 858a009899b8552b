// Package cluster reads the operator's config file: the named clusters gridwire runs jobs
// on, with how to reach them, their OS profile, LRMS and queues, and the TargetSystemInfo
// that job requirements are matched against. It owns the file's shape and validation;
// matching and rendering belong to the incarnator, running jobs to the executor.
package cluster

import (
	"errors"
	"fmt"
	"os"
	"reflect"
	"regexp"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Kinds of cluster.
const (
	KindFork = "fork" // the gateway's own host
	KindSSH  = "ssh"  // remote hosts reached over SSH
)

// ErrInvalid marks a config that cannot be used.
var ErrInvalid = errors.New("cluster: invalid config")

// Config is the whole config file.
type Config struct {
	// Path is the file the config was read from ("" for the default config).
	Path string     `yaml:"-"`
	pos  *positions // where each field is in that file (Locate)
	// DataDir is where the embedded server and local job directories live.
	DataDir string `yaml:"data_dir,omitempty"`
	// ProfileDir holds OS profile XML files; empty means the built-in profiles.
	ProfileDir string `yaml:"profile_dir,omitempty"`
	// MaxTransferAttempts is the stage-in/out retry budget when a job names none.
	MaxTransferAttempts int `yaml:"max_transfer_attempts,omitempty"`
	// Clusters, by name.
	Clusters []Cluster `yaml:"clusters"`
	// Tokens for the HTTP API.
	Tokens []Token `yaml:"tokens,omitempty"`
	// Users are user profiles: profile fields the operator sets per submitter (GPE OS
	// Profile 2.3.1), typically paths under a data centre's HOME allocation rules.
	Users []UserProfile `yaml:"users,omitempty"`
	// Signing names the public keys whose signatures an audit trusts, and where this
	// process keeps its own role keys.
	Signing Signing `yaml:"signing,omitempty"`
	// Extra sections owned by individual services, kept as raw YAML nodes.
	Stager  yaml.Node `yaml:"stager,omitempty"`
	Watcher yaml.Node `yaml:"watcher,omitempty"`
}

// Signing is the config's signing section.
type Signing struct {
	// KeysDir holds this process's role keys (nkey seeds, <role>.seed or
	// executor-<cluster>.seed); empty means <data>/keys.
	KeysDir string `yaml:"keys_dir,omitempty"`
	// Keys are the public keys an audit trusts, each with the role it speaks for.
	Keys []SigningKey `yaml:"keys,omitempty"`
}

// SigningKey is one trusted public key: a user nkey ("U...") and its role, limited to
// some clusters when Clusters is set (an executor key per cluster).
type SigningKey struct {
	Role     string   `yaml:"role"`
	Clusters []string `yaml:"clusters,omitempty"`
	Key      string   `yaml:"key"`
}

// Cluster is one named target.
type Cluster struct {
	Name       string   `yaml:"name"`
	Kind       string   `yaml:"kind"`               // fork or ssh
	Hosts      []string `yaml:"hosts,omitempty"`    // host[:port] for ssh
	User       string   `yaml:"user,omitempty"`     // ssh login
	Identity   string   `yaml:"identity,omitempty"` // private key file; empty: ssh-agent
	KnownHosts string   `yaml:"known_hosts,omitempty"`
	Profile    string   `yaml:"profile"`          // OS profile name (fork, slurm, pbs, ...)
	LRMS       string   `yaml:"lrms"`             // Fork, Slurm, PBS
	Queues     []string `yaml:"queues,omitempty"` // first is the default
	// WorkRoot is where job working directories are made on the target.
	WorkRoot string `yaml:"work_root,omitempty"`
	// Retention is how long an ended job's working directory is kept before the
	// executor removes it; nil keeps it forever.
	Retention *Retention `yaml:"retention,omitempty"`
	// RunAs is the unprivileged user a fork cluster's jobs run as; the gateway must run
	// as root (or as that user) to start them so. A gateway running as root refuses to
	// start a fork cluster without it, unless AllowRoot says jobs may run as root.
	RunAs string `yaml:"run_as,omitempty"`
	// AllowRoot is the operator's explicit consent that a fork cluster of a gateway
	// running as root runs its jobs as root.
	AllowRoot bool `yaml:"allow_root,omitempty"`
	// Fields are operator-fixed profile field values (inserted raw, trusted).
	Fields map[string]string `yaml:"fields,omitempty"`
	Info   SystemInfo        `yaml:"info,omitempty"`
}

// SystemInfo is the TargetSystemInfo requirements are matched against.
type SystemInfo struct {
	OSName            string     `yaml:"os_name,omitempty"`
	OSRelease         string     `yaml:"os_release,omitempty"`
	OSVersion         string     `yaml:"os_version,omitempty"`
	Platform          string     `yaml:"platform,omitempty"`
	CPUInstructionSet string     `yaml:"cpu_instruction_set,omitempty"`
	CPUHz             int64      `yaml:"cpu_hz,omitempty"` // hertz
	SMPSize           int64      `yaml:"smp_size,omitempty"`
	RAMSize           int64      `yaml:"ram_size,omitempty"`     // megabytes, as jobs ask
	VirtualSize       int64      `yaml:"virtual_size,omitempty"` // megabytes
	Software          []Software `yaml:"software,omitempty"`
	// Attributes are further resource attributes by name, for requirements with no
	// field above (JRDL's ram_available, storage_available, free_cpu, availability_1min,
	// availability_5min, availability_15min, scheduling_plugin, cpus; DDS's gpus; ...).
	// Numeric values are lower bounds a job's requirement must not exceed.
	Attributes map[string]string `yaml:"attributes,omitempty"`
}

// Software is one installed package.
type Software struct {
	Name    string `yaml:"name"`
	Version string `yaml:"version,omitempty"`
}

// UserProfile holds one submitter's profile fields. They are the operator's values
// (trusted, inserted raw) and win over the cluster's fields of the same name.
type UserProfile struct {
	Principal string            `yaml:"principal"` // the submitter, as recorded on the job
	Fields    map[string]string `yaml:"fields"`
}

// UserFields returns the profile fields of a submitter, nil if it has none.
func (c Config) UserFields(principal string) map[string]string {
	for _, u := range c.Users {
		if u.Principal == principal {
			return u.Fields
		}
	}
	return nil
}

// Token is one bearer token of the HTTP API.
type Token struct {
	Token     string   `yaml:"token"`
	Principal string   `yaml:"principal"`
	Allow     []string `yaml:"allow"`             // submit, read, cancel, publish, admin
	Sources   []string `yaml:"sources,omitempty"` // CloudEvents sources it may publish for
	// Groups the principal belongs to: members of a group may cancel, hold, resume and
	// publish events for each other's jobs (admin: for every job).
	Groups []string `yaml:"groups,omitempty"`
}

var namePattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// Default is the config with no file: one local fork cluster.
func Default() Config {
	return Config{Clusters: []Cluster{LocalFork()}}
}

// LocalFork is the built-in "local" cluster: jobs run on the gateway's own host.
func LocalFork() Cluster {
	return Cluster{Name: "local", Kind: KindFork, Profile: "fork", LRMS: "Fork"}
}

// Load reads and validates a config file; a missing path means Default.
func Load(path string) (Config, error) {
	if path == "" {
		return Default(), nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("reading config: %w", err)
	}
	return Parse(path, data)
}

// Parse decodes config YAML. Every mistake is refused at once, each naming the file, the
// line and the field: "gw.yaml:7: clusters[1].kind: "forky" is not fork or ssh".
func Parse(name string, data []byte) (Config, error) {
	var c Config
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return Config{}, errors.Join(decodeErrors(name, err, nil)...)
	}
	pos := positionsOf(&doc, "")
	var errs []error
	unknownKeys(&doc, reflect.TypeFor[Config](), "", &errs)
	if len(errs) == 0 && !doc.IsZero() {
		if err := doc.Decode(&c); err != nil {
			errs = decodeErrors(name, err, pos)
		}
	}
	if len(errs) > 0 {
		return Config{}, locate(name, errors.Join(errs...), pos)
	}
	c.Path, c.pos = name, pos
	if len(c.Clusters) == 0 {
		c.Clusters = Default().Clusters
	}
	if err := c.Validate(); err != nil {
		return Config{}, locate(name, err, pos)
	}
	return c, nil
}

// Validate checks names, kinds and what each kind needs.
func (c Config) Validate() error {
	var errs []error
	seen := map[string]bool{}
	for i, cl := range c.Clusters {
		where := fmt.Sprintf("clusters[%d]", i)
		if !namePattern.MatchString(cl.Name) {
			errs = append(errs, invalid(where+".name", "%q must be 1-64 letters, digits, - or _", cl.Name))
		}
		if seen[cl.Name] {
			errs = append(errs, invalid(where+".name", "%q is used twice", cl.Name))
		}
		seen[cl.Name] = true
		switch cl.Kind {
		case KindFork:
		case KindSSH:
			if len(cl.Hosts) == 0 {
				errs = append(errs, invalid(where+".hosts", "an ssh cluster needs at least one host"))
			}
			if cl.KnownHosts == "" {
				errs = append(errs, invalid(where+".known_hosts", "an ssh cluster needs a known_hosts file"))
			}
		default:
			errs = append(errs, invalid(where+".kind", "%q is not fork or ssh", cl.Kind))
		}
		if cl.Kind != KindFork && (cl.RunAs != "" || cl.AllowRoot) {
			errs = append(errs, invalid(where+".run_as", "run_as and allow_root: only a fork cluster has them (an ssh cluster's jobs run as its user)"))
		}
		if cl.RunAs == "root" || cl.RunAs == "0" {
			errs = append(errs, invalid(where+".run_as", "%q is root; name an unprivileged user, or set allow_root", cl.RunAs))
		}
		if strings.TrimSpace(cl.Profile) == "" {
			errs = append(errs, invalid(where+".profile", "missing (the OS profile its jobs are rendered with: fork, slurm, pbs, ...)"))
		}
	}
	return errors.Join(errs...)
}

// Find returns the named cluster.
func (c Config) Find(name string) (Cluster, bool) {
	for _, cl := range c.Clusters {
		if cl.Name == name {
			return cl, true
		}
	}
	return Cluster{}, false
}
