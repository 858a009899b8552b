package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/gridwire/gridwire/pkg/cluster"
	"github.com/gridwire/gridwire/pkg/dirlock"
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
	// A running gridwire holds its store: say how to read its log while it runs, rather
	// than only that the directory is in use.
	lock, err := dirlock.Acquire(data)
	if errors.Is(err, dirlock.ErrLocked) {
		return &cliError{code: "data_in_use", exit: exitRefused, err: err, detail: fmt.Sprintf(
			"%v: a running gridwire serves this log. Stop it to read the log here, or read it through NATS: "+
				"run serve with --nats-listen ADDR --nats-user USER (and $GRIDWIRE_NATS_PASSWORD), then give this verb --nats-url nats://ADDR --nats-user USER", err)}
	}
	if err == nil {
		lock.Release()
	}
	return nil
}
