package readside

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gridwire/gridwire/events"
	"github.com/nats-io/nats.go/jetstream"
)

func scrape(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// /metrics reports jobs by cluster and state, append latency, and consumer lag per
// service.
func TestMetrics(t *testing.T) {
	b, st, srv := apiServer(t, nil)
	if _, err := b.JS.CreateOrUpdateConsumer(context.Background(), events.Stream, jetstream.ConsumerConfig{
		Durable: "stager-in", FilterSubject: events.SubjectAll, AckPolicy: jetstream.AckExplicitPolicy,
	}); err != nil {
		t.Fatal(err)
	}
	running, queued := events.NewID(), events.NewID()
	play(t, st, running, time.Now(), life(running, "hpc1", 0)[:7])
	play(t, st, queued, time.Now(), life(queued, "hpc1", 0)[:6])
	wants := []string{
		`gridwire_jobs{cluster="hpc1",state="RUNNING"} 1`,
		`gridwire_jobs{cluster="hpc1",state="QUEUED"} 1`,
		`gridwire_projection_seq 13`,
		`gridwire_event_append_seconds_count{event="submitted",service="external"} 2`,
		`gridwire_consumer_pending{consumer="stager-in",service="stager"} 13`,
		`go_goroutines`,
	}
	var out string
	eventually(t, "every metric", func() bool {
		out = scrape(t, srv.URL)
		for _, w := range wants {
			if !strings.Contains(out, w) {
				return false
			}
		}
		return true
	})
}
