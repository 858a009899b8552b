package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/gridwire/gridwire/pkg/cluster"
)

// requireLog refuses to open an embedded store that is not there: a verb that reads the
// log (audit, replay), run from another directory, would otherwise start an empty store
// and report on nothing as if all were well. With --nats-url the log is the server's.
func requireLog(f *busFlags) error {
	if f.natsURL != "" {
		return nil
	}
	cfg, err := cluster.Load(f.config)
	if err != nil {
		return err
	}
	data, err := filepath.Abs(firstOf(f.data, cfg.DataDir, ".gridwire-data"))
	if err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(data, "jetstream")); err != nil {
		return &cliError{code: "no_data", exit: exitNotFound, err: err, detail: fmt.Sprintf(
			"no gridwire log in %s (no jetstream/ store there): give --data (or $GRIDWIRE_DATA) the directory `gridwire serve` uses, or --nats-url", data)}
	}
	return nil
}
