package incarnator

import (
	"fmt"
	"hash/fnv"
	"strings"

	"github.com/gridwire/gridwire/events"
)

// placeHost chooses the job's host on a cluster of several: among the hosts every one of
// its host requirements names (the cluster matched because each names some host, not
// necessarily the same one), by its placement (events.HostPlacement) or else by a hash
// of its ID. On a cluster of one host, or for a job that asks nothing of hosts, the
// executor chooses as it always has. why says what keeps the job off this cluster.
func (t *target) placeHost(job *events.Job) (host, why string) {
	r := &job.Requirements
	if len(t.cl.Hosts) < 2 || len(r.Hosts) == 0 && r.Placement == nil {
		return "", ""
	}
	var hosts []string
	for _, h := range t.cl.Hosts {
		if t.hostMeets(r, splitHost(h)) {
			hosts = append(hosts, h)
		}
	}
	if len(hosts) == 0 {
		return "", "no one host of this cluster meets every host requirement (" + strings.Join(t.hostNames(), ", ") + ")"
	}
	p := r.Placement
	switch {
	case p != nil && p.MaxPerHost > 0:
		slot := p.Index / p.MaxPerHost
		if slot >= len(hosts) {
			return "", fmt.Sprintf("%s: %s #%d needs a host of its own, at most %d to a host on the %d that may run it",
				p.From.Label("max_per_host"), p.Spread, p.Index, p.MaxPerHost, len(hosts))
		}
		return hosts[slot], ""
	case p != nil && p.Together != "":
		return hosts[spread(job.Parent+"\x00"+p.Together, len(hosts))], ""
	}
	return hosts[spread(job.ID, len(hosts))], ""
}

// hostMeets reports whether one host name meets every host requirement.
func (t *target) hostMeets(r *events.Requirements, name string) bool {
	for _, n := range r.Hosts {
		if matchNames(n, "", "", []string{name}) != "" {
			return false
		}
	}
	return true
}

// spread maps a key to one of n places, the same one every time.
func spread(key string, n int) int {
	h := fnv.New32a()
	h.Write([]byte(key))
	return int(h.Sum32() % uint32(n))
}
