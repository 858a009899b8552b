package readside

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/gridwire/gridwire/events"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the read side's own Prometheus metrics: event append latency (from the
// log), observed by the projector. Jobs by cluster and state (from the job table) and
// consumer lag per service (from the server) are collected at each scrape.
type metrics struct {
	appendTime *prometheus.HistogramVec
}

// newMetrics registers the read side's collectors with reg: the append latency, and
// collectors of table's counts and of js's durable consumers.
func newMetrics(reg prometheus.Registerer, table *Table, js jetstream.JetStream) (*metrics, error) {
	m := &metrics{appendTime: prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "gridwire_event_append_seconds",
		Help:    "Time from an event's creation (its CloudEvents time) to its storage in the log (the stream's timestamp), by event type and service.",
		Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
	}, []string{"event", "service"})}
	for _, c := range []prometheus.Collector{m.appendTime, tableCollector{table}, consumerCollector{js}} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("readside: registering metrics: %w", err)
		}
	}
	return m, nil
}

// observeAppend records one stored event's append latency.
func (m *metrics) observeAppend(e events.Event, stored time.Time) {
	if m == nil || e.Time.IsZero() {
		return
	}
	m.appendTime.WithLabelValues(string(e.Name), serviceOf(e.Source)).Observe(max(stored.Sub(e.Time), 0).Seconds())
}

// serviceOf is the service in a gridwire source (gridwire/<service>/<host>), else
// "external".
func serviceOf(source string) string {
	parts := strings.Split(source, "/")
	if len(parts) >= 2 && parts[0] == "gridwire" {
		return parts[1]
	}
	return "external"
}

// tableCollector reports jobs by cluster and state from the projection at each scrape.
type tableCollector struct{ t *Table }

var (
	jobsDesc = prometheus.NewDesc("gridwire_jobs", "Jobs by cluster and canonical state, from the job table projection.",
		[]string{"cluster", "state"}, nil)
	projectionSeqDesc = prometheus.NewDesc("gridwire_projection_seq", "Stream sequence the job table projection reflects.", nil, nil)
	pendingDesc       = prometheus.NewDesc("gridwire_consumer_pending", "Events a service's durable consumer has not yet been delivered (its lag).",
		[]string{"service", "consumer"}, nil)
	ackPendingDesc = prometheus.NewDesc("gridwire_consumer_ack_pending", "Events delivered to a service's consumer and not yet acknowledged.",
		[]string{"service", "consumer"}, nil)
)

func (c tableCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- jobsDesc
	ch <- projectionSeqDesc
}

func (c tableCollector) Collect(ch chan<- prometheus.Metric) {
	meta := c.t.Meta()
	for cl, byState := range meta.Counts {
		for st, n := range byState {
			ch <- prometheus.MustNewConstMetric(jobsDesc, prometheus.GaugeValue, float64(n), cl, st)
		}
	}
	ch <- prometheus.MustNewConstMetric(projectionSeqDesc, prometheus.GaugeValue, float64(meta.Seq))
}

// consumerCollector reports each durable consumer's pending count at each scrape.
type consumerCollector struct{ js jetstream.JetStream }

func (c consumerCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- pendingDesc
	ch <- ackPendingDesc
}

func (c consumerCollector) Collect(ch chan<- prometheus.Metric) {
	if c.js == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	stream, err := c.js.Stream(ctx, events.Stream)
	if err != nil {
		return
	}
	lister := stream.ListConsumers(ctx)
	for info := range lister.Info() {
		if info.Config.Durable == "" {
			continue // ordered consumers of readers (SSE, projector) are not services
		}
		svc, _, _ := strings.Cut(info.Name, "-")
		ch <- prometheus.MustNewConstMetric(pendingDesc, prometheus.GaugeValue, float64(info.NumPending), svc, info.Name)
		ch <- prometheus.MustNewConstMetric(ackPendingDesc, prometheus.GaugeValue, float64(info.NumAckPending), svc, info.Name)
	}
}
