package ptp

import (
	"context"
	"strings"

	"github.com/gridwire/gridwire/pkg/cluster"
)

// DefaultQueue names the one queue of a cluster that lists none.
const DefaultQueue = "default"

// machine is a cluster as PTP sees it.
type machine struct {
	Name   string
	Offset uint32
	Nodes  []node
}

type node struct {
	Host   string
	Offset uint32
}

type queue struct {
	Cluster, Name string
	Offset        uint32
	// Implied marks the one queue shown for a cluster that lists none: a job sent to it
	// asks for no queue.
	Implied bool
}

// Label is the queue's name in PTP: queues belong to the resource manager there, so the
// cluster is part of it.
func (q queue) Label() string {
	if q.Cluster == "" {
		return q.Name
	}
	return q.Cluster + "/" + q.Name
}

// machines is the fixed part of the model: clusters, their hosts and queues, from the
// configuration, with their element offsets.
type machines struct {
	list    []machine
	queues  []queue
	byQueue map[string]queue // cluster + "/" + queue
	byOff   map[uint32]queue
}

func layout(ctx context.Context, ids *ids, clusters []cluster.Cluster) (*machines, error) {
	m := &machines{byQueue: map[string]queue{}, byOff: map[uint32]queue{}}
	for _, cl := range clusters {
		mach, err := layoutCluster(ctx, ids, cl)
		if err != nil {
			return nil, err
		}
		m.list = append(m.list, mach)
		names := cl.Queues
		if len(names) == 0 {
			names = []string{DefaultQueue}
		}
		for _, q := range names {
			if err := m.addQueue(ctx, ids, cl.Name, q, len(cl.Queues) == 0); err != nil {
				return nil, err
			}
		}
	}
	return m, m.addQueue(ctx, ids, "", UnplacedQueue, false)
}

func layoutCluster(ctx context.Context, ids *ids, cl cluster.Cluster) (machine, error) {
	off, err := ids.named(ctx, "c", cl.Name)
	if err != nil {
		return machine{}, err
	}
	mach := machine{Name: cl.Name, Offset: off}
	hosts := cl.Hosts
	if len(hosts) == 0 {
		hosts = []string{"localhost"}
	}
	for _, h := range hosts {
		off, err := ids.named(ctx, "h", cl.Name, h)
		if err != nil {
			return machine{}, err
		}
		mach.Nodes = append(mach.Nodes, node{Host: h, Offset: off})
	}
	return mach, nil
}

func (m *machines) addQueue(ctx context.Context, ids *ids, clusterName, name string, implied bool) error {
	off, err := ids.named(ctx, "q", clusterName, name)
	if err != nil {
		return err
	}
	q := queue{Cluster: clusterName, Name: name, Offset: off, Implied: implied}
	m.queues = append(m.queues, q)
	m.byQueue[clusterName+"/"+name] = q
	m.byOff[off] = q
	return nil
}

// queueOf is the queue a job sits in: its cluster's queue by name, else the cluster's
// first queue, else the unplaced queue.
func (m *machines) queueOf(v *jobView) queue {
	if q, ok := m.byQueue[v.Cluster+"/"+v.Queue]; ok && v.Queue != "" {
		return q
	}
	for _, q := range m.queues {
		if q.Cluster == v.Cluster && v.Cluster != "" {
			return q
		}
	}
	return m.byQueue["/"+UnplacedQueue]
}

// nodeOf is the node element of a job's host, if it is one of the cluster's.
func (m *machines) nodeOf(v *jobView) (uint32, bool) {
	for _, mach := range m.list {
		if mach.Name != v.Cluster {
			continue
		}
		for _, n := range mach.Nodes {
			if strings.EqualFold(n.Host, v.Host) || v.Host == "" && len(mach.Nodes) == 1 {
				return n.Offset, true
			}
		}
	}
	return 0, false
}
