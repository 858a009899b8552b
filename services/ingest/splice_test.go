package ingest

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/services/ingest/dds"
	"github.com/gridwire/gridwire/services/ingest/internal/xmltree"
)

// spliceTopologies are DDS topologies that expand: the test corpus's and topology100k
// with 50 groups.
func spliceTopologies(t *testing.T) map[string][]byte {
	t.Helper()
	out := map[string][]byte{"topology100k(50)": bigTopology(50)}
	files, _ := filepath.Glob("testdata/dds/*.xml")
	for _, f := range files {
		if strings.HasPrefix(filepath.Base(f), "err_") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out[f] = b
	}
	return out
}

// streamJobs expands a topology as a stream's second pass does: stamped, linked, each
// job handed to f as a copy of its own (f may keep it).
func streamJobs(t *testing.T, data []byte, f func(i int, j *events.Job)) {
	t.Helper()
	topo := preparedTopology(t, data)
	st := newStamper(Submission{File: "t.xml", Data: data, ContentType: "application/xml"})
	parent, children, now := events.NewID(), events.NewIDRange(topo.Count()), time.Now()
	i := 0
	if err := topo.Each(func(j *events.Job) error {
		st.stamp(j, i)
		j.Submitter = "u"
		if i > 0 {
			j.ID, j.Parent = children.At(i-1), parent
		} else {
			j.ID = parent
		}
		anchorDeadline(j, now)
		c := *j
		f(i, &c)
		i++
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// The spliced payload of every instance of every test topology is json.Marshal's, byte
// for byte, and the splice (not a fallback to json.Marshal) made it.
func TestSplicedPayloadIsMarshal(t *testing.T) {
	for name, data := range spliceTopologies(t) {
		sp := newSplicer()
		streamJobs(t, data, func(i int, j *events.Job) {
			want, err := json.Marshal(j)
			if err != nil {
				t.Fatal(err)
			}
			got, err := sp.appendJob([]byte("prefix"), j)
			if err != nil || !bytes.Equal(got, append([]byte("prefix"), want...)) {
				t.Fatalf("%s: job %d (%v):\nspliced   %s\nmarshalled prefix%s", name, i, err, got, want)
			}
		})
		for k, tpl := range sp.shapes.vals {
			if !tpl.ok {
				t.Errorf("%s: shape %v is marshalled, not spliced", name, sp.shapes.keys[k])
			}
		}
	}
}

// Whatever an instance's slots hold (quotes, HTML, control characters, other scripts,
// bytes that are not UTF-8, empty strings, zeros, negative numbers), its payload is
// json.Marshal's: a value that does not fit the shape's template is marshalled.
func TestSplicedPayloadOfOddSlotsIsMarshal(t *testing.T) {
	r := rand.New(rand.NewPCG(16, 2))
	odd := []string{"", "a\"b", "<&>", "tab\there", "\x00", "\u2028", "é", "\xff", `\`, "plain", "x/y_z-1"}
	sp := newSplicer()
	var jobs []*events.Job
	streamJobs(t, bigTopology(20), func(i int, j *events.Job) { jobs = append(jobs, j) })
	for _, j := range jobs {
		for _, s := range slotsOf(j, nil) {
			if r.IntN(4) != 0 {
				continue
			}
			if s.s != nil {
				*s.s = odd[r.IntN(len(odd))]
			} else {
				*s.n = r.IntN(5) - 2
			}
		}
		want, err := json.Marshal(j)
		if err != nil {
			t.Fatal(err)
		}
		got, err := sp.appendJob(nil, j)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%v:\nspliced    %s\nmarshalled %s", err, got, want)
		}
	}
}

// The splice and the stream's check rest on this: the instances of one shape (task,
// group, collection) are equal but for their slots, in every test topology.
func TestInstancesOfAShapeDifferOnlyInSlots(t *testing.T) {
	for name, data := range spliceTopologies(t) {
		first := map[shapeKey]events.Job{}
		streamJobs(t, data, func(i int, j *events.Job) {
			key, ok := shapeOf(j)
			if !ok {
				return
			}
			blank := blankSlots(j)
			if f, seen := first[key]; !seen {
				first[key] = blank
			} else if !reflect.DeepEqual(f, blank) {
				t.Fatalf("%s: job %d differs from the first of its shape %v beyond its slots:\n%+v\n%+v", name, i, key, blank, f)
			}
		})
	}
}

// blankSlots is a deep enough copy of j with every slot zero.
func blankSlots(j *events.Job) events.Job {
	c := slotCopy(j)
	for _, s := range slotsOf(&c, nil) {
		if s.s != nil {
			*s.s = ""
		} else {
			*s.n = 0
		}
	}
	return c
}

// A shape table finds every shape it was given, by its scan and, past shapeScanMax
// shapes, by its map, and no other.
func TestShapeTable(t *testing.T) {
	var tab shapeTable[int]
	key := func(i int) shapeKey { return shapeKey{"t" + strconv.Itoa(i%7), "g" + strconv.Itoa(i/7), ""} }
	for i := range 3 * shapeScanMax {
		tab.put(key(i), i)
		for j := range 3 * shapeScanMax {
			v, ok := tab.get(key(j))
			if ok != (j <= i) || ok && v != j {
				t.Fatalf("after %d puts, get(%v) = %d, %v", i+1, key(j), v, ok)
			}
		}
	}
}

// EachShared, which a stream expands with, gives the jobs Each gives, each as it is
// emitted.
func TestEachSharedIsEach(t *testing.T) {
	for name, data := range spliceTopologies(t) {
		topo := preparedTopology(t, data)
		var want [][]byte
		_ = topo.Each(func(j *events.Job) error {
			b, err := json.Marshal(j)
			want = append(want, b)
			return err
		})
		i := 0
		_ = topo.EachShared(func(j *events.Job) error {
			b, err := json.Marshal(j)
			if err != nil || i >= len(want) || !bytes.Equal(b, want[i]) {
				t.Fatalf("%s: job %d from EachShared (%v):\n%s\nfrom Each:\n%s", name, i, err, b, want[min(i, len(want)-1)])
			}
			i++
			return nil
		})
		if i != len(want) {
			t.Fatalf("%s: %d jobs from EachShared, %d from Each", name, i, len(want))
		}
	}
}

// preparedTopology parses and prepares a topology the test knows to be valid.
func preparedTopology(t *testing.T, data []byte) *dds.Topology {
	t.Helper()
	root, err := xmltree.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	topo, problems := dds.Prepare(root)
	if problems != nil {
		t.Fatal(problems)
	}
	return topo
}
