package main

import (
	"context"
	"testing"
)

// --state-cache-mib bounds the memory of the process's state cache; 0 keeps no state.
func TestStateCacheFlagBoundsTheCache(t *testing.T) {
	for mib, want := range map[int][2]int64{0: {0, 0}, 3: {1 << 16, 3 << 20}} {
		e := &env{getenv: func(string) string { return "" }}
		sys, err := openSystem(context.Background(), e, &busFlags{data: t.TempDir(), logLevel: "error", stateCacheMiB: mib}, true)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := sys.connect("readside"); err != nil {
			t.Fatal(err)
		}
		states, bytes := sys.cache.Limit()
		sys.close()
		if int64(states) != want[0] || bytes != want[1] {
			t.Errorf("--state-cache-mib %d: %d states, %d bytes; want %v", mib, states, bytes, want)
		}
	}
}
