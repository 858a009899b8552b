package main

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/pkg/cluster"
	"github.com/spf13/cobra"
)

// seedSuffix ends the name of a role key's seed file in a key directory.
const seedSuffix = ".seed"

// keyset is one process's signing keys and the keyring its audits trust. The key
// directory holds one nkey seed per role (<role>.seed), or per cluster for executors
// (executor-<cluster>.seed, a key only that cluster's jobs accept); a role a service of
// this process needs that has none gets one made on first use, so `make run` needs no
// setup. The keyring is the config's signing.keys and the public halves of the seeds
// found here: what this host's own services signed verifies on this host.
type keyset struct {
	dir  string
	log  *slog.Logger
	mu   sync.Mutex
	ring events.Keyring
	keys map[string]*events.SigningKey // by file stem
}

// openKeyset reads the config's trusted keys and the seeds already in dir.
func openKeyset(dir string, cfg cluster.Config, log *slog.Logger) (*keyset, error) {
	k := &keyset{dir: dir, log: log, keys: map[string]*events.SigningKey{}}
	for i, listed := range cfg.Signing.Keys {
		role, err := events.ParseRole(listed.Role)
		if err == nil {
			err = k.ring.Add(strings.TrimSpace(listed.Key), events.Grant{Role: role, Clusters: listed.Clusters})
		}
		if err != nil {
			return nil, cfg.Locate(fmt.Errorf("signing.keys[%d]: %w", i, err))
		}
	}
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return k, nil
	}
	if err != nil {
		return nil, fmt.Errorf("signing keys: %w", err)
	}
	for _, ent := range entries {
		if stem, ok := strings.CutSuffix(ent.Name(), seedSuffix); ok && !ent.IsDir() {
			if _, err := k.load(stem); err != nil {
				return nil, err
			}
		}
	}
	return k, nil
}

// grantOf reads a seed file's stem: a role, or executor-<cluster>.
func grantOf(stem string) (events.Grant, error) {
	if c, ok := strings.CutPrefix(stem, string(events.RoleExecutor)+"-"); ok && events.ValidRoute(c) {
		return events.Grant{Role: events.RoleExecutor, Clusters: []string{c}}, nil
	}
	role, err := events.ParseRole(stem)
	return events.Grant{Role: role}, err
}

// load reads one seed file and trusts its public key.
func (k *keyset) load(stem string) (*events.SigningKey, error) {
	path := filepath.Join(k.dir, stem+seedSuffix)
	g, err := grantOf(stem)
	if err != nil {
		return nil, fmt.Errorf("signing key %s: %w", path, err)
	}
	seed, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("signing key: %w", err)
	}
	key, err := events.NewSigningKey(bytes.TrimSpace(seed), g)
	if err != nil {
		return nil, fmt.Errorf("signing key %s: %w", path, err)
	}
	if err := k.ring.Add(key.PublicKey(), g); err != nil {
		return nil, fmt.Errorf("signing key %s: %w", path, err)
	}
	k.keys[stem] = key
	return key, nil
}

// signer is the key a service of the given role signs with: for an executor of a
// cluster, that cluster's key when the directory has one, else the role's own, made
// now if there is none.
func (k *keyset) signer(role events.Role, clusterName string) (*events.SigningKey, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if clusterName != "" {
		if key, ok := k.keys[string(role)+"-"+clusterName]; ok {
			return key, nil
		}
	}
	if key, ok := k.keys[string(role)]; ok {
		return key, nil
	}
	return k.generate(string(role))
}

// generate writes a fresh seed for stem (0600, in a 0700 directory) unless one appeared
// meanwhile, and loads it. The seed is written whole under a name no reader takes (it
// does not end in .seed) and then linked to its own name, which fails if another
// process made the key first: a process reading the directory meanwhile (a second serve
// about to be refused, another service sharing the keys) never finds a seed file
// half-written.
func (k *keyset) generate(stem string) (*events.SigningKey, error) {
	if err := os.MkdirAll(k.dir, 0o700); err != nil {
		return nil, fmt.Errorf("signing keys: %w", err)
	}
	seed, err := events.NewSeed()
	if err != nil {
		return nil, err
	}
	path := filepath.Join(k.dir, stem+seedSuffix)
	f, err := os.CreateTemp(k.dir, "."+stem+seedSuffix+".new-*")
	if err != nil {
		return nil, fmt.Errorf("signing keys: %w", err)
	}
	defer os.Remove(f.Name())
	_, err = f.Write(append(seed, '\n'))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Link(f.Name(), path)
	}
	switch {
	case errors.Is(err, fs.ErrExist):
		return k.load(stem)
	case err != nil:
		return nil, fmt.Errorf("signing keys: %w", err)
	}
	key, err := k.load(stem)
	if err == nil && k.log != nil {
		k.log.Info("made a signing key; list its public key under signing.keys where logs are audited",
			"role", stem, "key", key.PublicKey(), "file", path)
	}
	return key, err
}

// config is the signing.keys section that trusts every key of the directory.
func (k *keyset) config() string {
	var b strings.Builder
	b.WriteString("signing:\n  keys:\n")
	for _, stem := range slices.Sorted(maps.Keys(k.keys)) {
		key := k.keys[stem]
		g := key.Grant()
		fmt.Fprintf(&b, "    - {role: %s, ", g.Role)
		if len(g.Clusters) > 0 {
			fmt.Fprintf(&b, "clusters: [%s], ", strings.Join(g.Clusters, ", "))
		}
		fmt.Fprintf(&b, "key: %s}\n", key.PublicKey())
	}
	return b.String()
}

// keysDir is where this process's role keys live: --signing-keys, else the config's
// signing.keys_dir, else <data>/keys.
func (f *busFlags) keysDir(cfg cluster.Config, data string) string {
	return firstOf(f.signingKeys, cfg.Signing.KeysDir, filepath.Join(data, "keys"))
}

func keysCmd(e *env) *cobra.Command {
	f := &busFlags{}
	var generate []string
	cmd := &cobra.Command{
		Use:   "keys [--generate ROLE...]",
		Short: "show (and make) this host's event signing keys, as the config's signing section",
		Long: "keys prints the signing.keys section that trusts every role key in the key directory\n" +
			"(--signing-keys, the config's signing.keys_dir, or <data>/keys). --generate makes the\n" +
			"named keys first when they are missing: a role (ingest, incarnator, stager, executor,\n" +
			"watcher) or executor-<cluster> for a key only that cluster's jobs accept.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := cluster.Load(f.config)
			if err != nil {
				return err
			}
			data, err := filepath.Abs(firstOf(f.data, cfg.DataDir, ".gridwire-data"))
			if err != nil {
				return err
			}
			ks, err := openKeyset(f.keysDir(cfg, data), cluster.Config{}, nil)
			if err != nil {
				return err
			}
			for _, stem := range generate {
				if _, err := grantOf(stem); err != nil {
					return usageErrorf("keys --generate %s: %v", stem, err)
				}
				if _, ok := ks.keys[stem]; !ok {
					if _, err := ks.generate(stem); err != nil {
						return err
					}
				}
			}
			fmt.Fprint(e.stdout, ks.config())
			return nil
		},
	}
	f.register(cmd.Flags(), e)
	cmd.Flags().StringSliceVar(&generate, "generate", nil, "make these role keys when missing (ROLE or executor-CLUSTER)")
	return cmd
}
