package watcher

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/pkg/cluster"
)

func scrape(t *testing.T, m *Metrics) string {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	b, _ := io.ReadAll(rec.Body)
	return string(b)
}

// /metrics reports jobs by cluster and state, append latency, consumer lag per service,
// and polls and poll failures per cluster.
func TestMetrics(t *testing.T) {
	b, st := openBus(t)
	api := &API{Store: st, JS: b.JS}
	p := &flakyProber{}
	p.down.Store(true)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 2)
	cfg := Config{Clusters: []cluster.Cluster{{Name: "hpc1", Kind: cluster.KindSSH}},
		PollMin: 5 * time.Millisecond, PollMax: 10 * time.Millisecond, FlushEvery: 10 * time.Millisecond}
	go func() {
		done <- Run(ctx, cfg, Deps{JS: b.JS, Conn: b.Conn, Store: st, Logger: slog.New(slog.DiscardHandler),
			Probers: map[string]Prober{"hpc1": p}, API: api})
	}()
	go func() { done <- api.Run(ctx) }()
	defer func() {
		cancel()
		for range 2 {
			if err := <-done; err != nil {
				t.Errorf("stopping: %v", err)
			}
		}
	}()
	running, queued := events.NewID(), events.NewID()
	play(t, st, running, time.Now(), life(running, "hpc1", 0)[:7])
	play(t, st, queued, time.Now(), life(queued, "hpc1", 0)[:6])
	wants := []string{
		`gridwire_jobs{cluster="hpc1",state="RUNNING"} 1`,
		`gridwire_jobs{cluster="hpc1",state="QUEUED"} 1`,
		`gridwire_event_append_seconds_count{event="submitted",service="external"} 2`,
		`gridwire_status_poll_failures_total{cluster="hpc1"}`,
		`gridwire_status_polls_total{cluster="hpc1"}`,
		`gridwire_consumer_pending{consumer="watcher-end",service="watcher"} 0`,
		`gridwire_consumer_pending{consumer="watcher-hpc1",service="watcher"} 0`,
	}
	var out string
	eventually(t, "every metric", func() bool {
		out = scrape(t, api.Metrics())
		for _, w := range wants {
			if !strings.Contains(out, w) {
				return false
			}
		}
		return true
	})
}
