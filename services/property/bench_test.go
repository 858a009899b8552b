package property_test

import (
	"bufio"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gridwire/gridwire/events"
)

// BenchmarkSetToNotify measures, with 1,000 tasks of one session watching a property
// over real HTTP (each its own SSE stream), the time from a writer's PUT to each
// watcher receiving the value: the append to the session's history, the projection
// into KV, the KV watch and the fan-out. Each op is one set; p50 and p99 are over every
// (set, watcher) pair.
//
//	go test -run '^$' -bench SetToNotify -benchtime 200x ./services/property
func BenchmarkSetToNotify(b *testing.B) {
	const watchers = 1000
	e := newEnv(b)
	writer := task("main/server_0", "", p("peer", "write", ""))
	readers := make([]*events.Job, watchers)
	for i := range readers {
		readers[i] = task("main/clients/client_"+strconv.Itoa(i), "", p("peer", "read", ""))
	}
	e.session(append([]*events.Job{writer}, readers...)...)
	type sample struct {
		at   time.Time
		line string
	}
	got := make(chan sample, watchers)
	ready := make(chan struct{}, watchers)
	for _, r := range readers {
		req, _ := http.NewRequest(http.MethodGet, e.srv.URL+"/v1/tasks/self/properties?watch=1&key=peer", nil)
		req.Header.Set("Authorization", "Bearer "+e.key.Issue(r.ID))
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != http.StatusOK {
			b.Fatalf("watch: %v %v", err, resp)
		}
		b.Cleanup(func() { resp.Body.Close() })
		go func() {
			sc := bufio.NewScanner(resp.Body)
			for sc.Scan() {
				line := sc.Text()
				if line == ": watching" {
					ready <- struct{}{}
				}
				if strings.HasPrefix(line, "data: ") {
					got <- sample{time.Now(), line}
				}
			}
		}()
	}
	for range watchers {
		<-ready
	}
	lat := make([]time.Duration, 0, b.N*watchers)
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		value := "v" + strconv.Itoa(i)
		start := time.Now()
		e.mustPut(writer, "peer", value)
		for range watchers {
			s := <-got
			if !strings.Contains(s.line, `"value":"`+value+`"`) {
				b.Fatalf("a watcher got %s while %s was set", s.line, value)
			}
			lat = append(lat, s.at.Sub(start))
		}
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
	b.ReportMetric(float64(lat[len(lat)-1].Microseconds())/1000, "max-ms")
}
