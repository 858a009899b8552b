package readside

import (
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gridwire/gridwire/events"
)

// JobsBucket is the KV bucket holding the job table projection: one entry per job
// (key JobKey(id), value the job's folded state, stamped with the stream sequence of its
// last event) and MetaKey (the stream sequence the whole projection reflects, and how
// many jobs each cluster has in each state). It is rebuilt from the log by Rebuild.
const JobsBucket = "gridwire-jobs"

// MetaKey is the projection's stamp and per-cluster, per-state counts.
const MetaKey = "meta"

// jobKeyPrefix prefixes each job's key in a projection bucket.
const jobKeyPrefix = "job."

// JobKey is a job's key in a projection bucket.
func JobKey(id string) string { return jobKeyPrefix + id }

// NoCluster is the cluster a job is counted under before it is incarnated.
const NoCluster = "-"

// Meta is the projection's stamp: everything up to Seq is folded in.
type Meta struct {
	Seq    uint64                    `json:"seq"`
	Jobs   int                       `json:"jobs"`
	Counts map[string]map[string]int `json:"counts"` // cluster → state → jobs
}

// Row is one job as the projection keeps it: its folded state, stripped of what the job
// table does not show (the description, the rendered scripts, the transfer list, the
// chain hash, what a stage-out copied and a directory removal did beyond whether they
// succeeded), so a table of millions of jobs fits in memory. Row.LastSeq stamps it.
type Row = events.State

// strip reduces a folded state to its Row. Apply never reads what strip drops (beyond
// the job's kind; of a stage-out and a directory removal it reads only that they happened
// and, of the stage-out, whether it succeeded), so folding further events into a Row
// gives the Row of the full fold.
func strip(st events.State) Row {
	r := compact(st)
	return r.state()
}

// Table is a job table in memory: the projection the live projector maintains, a
// replay builds, and the read API mirrors from KV. It is safe for concurrent use.
type Table struct {
	mu     sync.RWMutex
	rows   map[string]row
	order  []string // job IDs sorted (ULIDs: submission order)
	counts map[string]map[string]int
	seq    uint64
	// scratch holds the jobs folds start from: Apply reads one and the result is
	// compacted at once, so a fold allocates no job of its own.
	scratch sync.Pool
}

// NewTable returns an empty table.
func NewTable() *Table {
	return &Table{rows: map[string]row{}, counts: map[string]map[string]int{},
		scratch: sync.Pool{New: func() any { return new(events.Job) }}}
}

// Apply folds one stored event into the table (events.Apply, reading of the large
// payloads only what a row keeps: see foldRow). An event at or below the job's stamp is
// already folded and changes nothing; an event the state machine refuses leaves the job
// as it was. It reports whether the job's row changed.
//
// The fold runs outside the table's lock, so a replay's shards fold into one table in
// parallel (each job in one shard); a row that moved meanwhile is folded again.
func (t *Table) Apply(e events.Event) (bool, error) {
	for {
		t.mu.RLock()
		old, ok := t.rows[e.JobID]
		t.mu.RUnlock()
		if ok && e.Seq != 0 && e.Seq <= old.lastSeq {
			t.SetSeq(e.Seq)
			return false, nil
		}
		next, err := t.fold(old, e)
		t.mu.Lock()
		t.seq = max(t.seq, e.Seq)
		if cur, still := t.rows[e.JobID]; still != ok || cur.lastSeq != old.lastSeq {
			t.mu.Unlock()
			continue
		}
		if err == nil {
			t.setLocked(next, ok, old)
		}
		t.mu.Unlock()
		return err == nil, err
	}
}

// fold applies e to a row and compacts the result.
func (t *Table) fold(old row, e events.Event) (row, error) {
	j := t.scratch.Get().(*events.Job)
	defer t.scratch.Put(j)
	return foldRow(old, e, j)
}

// Set puts a row as it is (a mirror of the KV projection).
func (t *Table) Set(r Row) {
	t.mu.Lock()
	defer t.mu.Unlock()
	old, ok := t.rows[r.JobID]
	if ok && old.lastSeq > r.LastSeq {
		return
	}
	t.setLocked(old.next(r), ok, old)
	t.seq = max(t.seq, r.LastSeq)
}

// SetSeq records that the table reflects the stream up to seq.
func (t *Table) SetSeq(seq uint64) {
	t.mu.Lock()
	t.seq = max(t.seq, seq)
	t.mu.Unlock()
}

func (t *Table) setLocked(r row, existed bool, old row) {
	if existed {
		t.count(&old, -1)
	} else {
		i, _ := slices.BinarySearch(t.order, r.id)
		t.order = slices.Insert(t.order, i, r.id)
	}
	t.rows[r.id] = r
	t.count(&r, 1)
}

func (t *Table) count(r *row, d int) {
	cl := r.cluster.String()
	if cl == "" {
		cl = NoCluster
	}
	m := t.counts[cl]
	if m == nil {
		m = map[string]int{}
		t.counts[cl] = m
	}
	s := string(r.statusOf())
	m[s] += d
	if m[s] == 0 {
		delete(m, s)
	}
}

// Row returns one job's row.
func (t *Table) Row(id string) (Row, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	r, ok := t.rows[id]
	if !ok {
		return Row{}, false
	}
	return r.state(), true
}

// Meta returns the table's stamp and counts.
func (t *Table) Meta() Meta {
	t.mu.RLock()
	defer t.mu.RUnlock()
	m := Meta{Seq: t.seq, Jobs: len(t.rows), Counts: make(map[string]map[string]int, len(t.counts))}
	for cl, byState := range t.counts {
		if len(byState) == 0 {
			continue
		}
		c := make(map[string]int, len(byState))
		for s, n := range byState {
			c[s] = n
		}
		m.Counts[cl] = c
	}
	return m
}

// Rows returns every row in job ID order.
func (t *Table) Rows() []Row {
	t.mu.RLock()
	defer t.mu.RUnlock()
	out := make([]Row, 0, len(t.order))
	for _, id := range t.order {
		r := t.rows[id]
		out = append(out, r.state())
	}
	return out
}

// Query selects rows of the job table. Zero fields match everything.
type Query struct {
	States     []events.Status
	Cluster    string
	Submitter  string
	Since      time.Time // submitted at or after
	Until      time.Time // submitted before
	After      string    // page cursor: the last job ID of the previous page
	Limit      int       // default 100
	Descending bool      // newest first
	// Text matches jobs whose ID, name, submitter, reason or cluster holds it (any case).
	Text string
	// Parent selects the jobs of one group (JRDL document, DDS session); Roots the jobs
	// that are in no group (and the groups themselves).
	Parent string
	Roots  bool
}

// Page is one page of a query.
type Page struct {
	Jobs []JobView `json:"jobs"`
	// Next is the cursor of the following page ("" on the last one).
	Next string `json:"next,omitempty"`
	// Seq is the stream sequence the table reflects.
	Seq uint64 `json:"seq"`
	// Total is how many jobs the query matches, on every page; Counts is how many of
	// them are in each state when the state filter is left out (what a filter by state
	// would find); Clusters are the clusters of those jobs.
	Total    int                   `json:"total"`
	Counts   map[events.Status]int `json:"counts"`
	Clusters []string              `json:"clusters"`
}

// Select runs a query over the table in job ID (submission) order.
func (t *Table) Select(q Query) Page {
	if q.Limit <= 0 {
		q.Limit = 100
	}
	t.mu.RLock()
	defer t.mu.RUnlock()
	p := Page{Jobs: []JobView{}, Seq: t.seq}
	ids := t.order
	start, step, end := 0, 1, len(ids)
	if q.Descending {
		start, step, end = len(ids)-1, -1, -1
	}
	if q.After != "" {
		i, found := slices.BinarySearch(ids, q.After)
		switch {
		case !q.Descending && found:
			start = i + 1
		case !q.Descending:
			start = i
		default:
			start = i - 1
		}
	}
	for i := start; i != end && i >= 0 && i < len(ids); i += step {
		r := t.rows[ids[i]]
		if !q.matches(&r) {
			continue
		}
		if len(p.Jobs) == q.Limit {
			p.Next = p.Jobs[len(p.Jobs)-1].ID
			break
		}
		p.Jobs = append(p.Jobs, ViewOf(r.state()))
	}
	t.summarise(q, &p)
	return p
}

func (q Query) matches(r *row) bool {
	switch {
	case len(q.States) > 0 && !slices.Contains(q.States, r.statusOf()):
		return false
	case q.Cluster != "" && r.cluster.String() != q.Cluster:
		return false
	case q.Submitter != "" && (!r.has(flagJob) || r.submitter.String() != q.Submitter):
		return false
	case !q.Since.IsZero() && r.time(0).Before(q.Since):
		return false
	case !q.Until.IsZero() && !r.time(0).Before(q.Until):
		return false
	case q.Parent != "" && (!r.has(flagJob) || r.parent.String() != q.Parent):
		return false
	case q.Roots && r.has(flagJob) && r.parent != (sym{}):
		return false
	case q.Text != "" && !matchesText(r, q.Text):
		return false
	}
	return true
}

// encodeRow is a row's KV value.
func encodeRow(r Row) []byte {
	b, _ := json.Marshal(r)
	return b
}

// jobOfKey returns the job ID of a projection key, "" for other keys.
func jobOfKey(key string) string {
	id, ok := strings.CutPrefix(key, jobKeyPrefix)
	if !ok {
		return ""
	}
	return id
}
