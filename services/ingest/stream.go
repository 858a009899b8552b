package ingest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/services/ingest/dds"
	"github.com/gridwire/gridwire/services/ingest/internal/xmltree"
)

// StreamMin is the number of task instances from which a DDS topology is submitted as a
// stream: its instances are expanded twice (once to check every one, once to append
// them), and never held all at once. A million instances held as canonical jobs take
// about 1.8 KB each, and their encoded events as much again; a stream holds one window.
const StreamMin = 50_000

// streamWindow is how many submitted events a stream encodes before appending them.
const streamWindow = 4096

// ulidLen is the length of a job or event ID.
const ulidLen = 26

// streamed is a DDS topology Submit appends as a stream, or nil for any other
// submission (which Submit parses and appends whole).
func (s *Service) streamed(sub Submission) *dds.Topology {
	if sub.IdempotencyKey != "" || sub.Uploads != nil || int64(len(sub.Data)) > s.maxBody() || len(sub.Data) > MaxDocumentBytes {
		return nil
	}
	format := sub.Format
	if format == "" {
		format, _ = Detect(sub.Data, sub.ContentType)
	}
	if format != FormatDDS {
		return nil
	}
	root, err := xmltree.Parse(sub.Data)
	if err != nil {
		return nil
	}
	t, problems := dds.Prepare(root)
	if problems != nil || t.Count() < StreamMin {
		return nil
	}
	return t
}

// submitStream submits a large topology: a first expansion checks every instance as
// Submit checks any job, so a topology with one bad instance appends nothing; the
// second gives the session its ID and its children a range of consecutive IDs, appends
// the session, then the instances in windows. One goroutine expands and encodes the
// next window while this one appends the last.
func (s *Service) submitStream(ctx context.Context, sub Submission, t *dds.Topology) (Accepted, error) {
	st := newStamper(sub)
	relaxGC()
	defer restoreGC()
	if err := s.checkStream(sub, t, st); err != nil {
		return Accepted{}, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	a := &appender{s: s, sub: sub, st: st, now: s.deps.Now(), parent: events.NewID(), children: events.NewIDRange(t.Count()),
		eventIDs: events.NewIDRange(t.Count() + 1), sp: newSplicer()}
	acc := Accepted{Parent: a.parent, Jobs: make([]string, 0, t.Count()+1)}
	// Two windows circulate: one being filled, one being appended.
	full, empty := make(chan *window, 1), make(chan *window, 2)
	empty <- &window{}
	empty <- &window{}
	var expandErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(full)
		expandErr = a.expand(ctx, t, full, empty)
	}()
	var err error
	for w := range full {
		if err == nil {
			err = s.appendWindow(ctx, w, &acc)
			if err != nil {
				cancel() // the expansion stops at its next window
			}
		}
		w.reset()
		empty <- w
	}
	<-done
	if err == nil && expandErr != nil && ctx.Err() == nil {
		err = expandErr
	}
	if err == nil && len(acc.Jobs) != t.Count()+1 {
		err = ctx.Err()
	}
	return acc, err
}

// checkStream is the first expansion: every instance checked as Submit checks a job.
// The instances of one shape (splice.go) hold the same strings but for their slots, so
// each shape is walked once by validateJob and every further instance only in its
// slots; Check, when set, sees every instance.
func (s *Service) checkStream(sub Submission, t *dds.Topology, st stamper) error {
	var seen shapeTable[bool]
	var slots []slot
	i := 0
	return t.EachShared(func(j *events.Job) error {
		st.stamp(j, i)
		key, shaped := shapeOf(j)
		checked := false
		if shaped {
			checked, _ = seen.get(key)
		}
		slots = slotsOf(j, slots[:0])
		if !checked || !plainSlots(slots) {
			if err := validateJob(j, s.fields); err != nil {
				return fmt.Errorf("%w: %s: job %d: %v", ErrInvalid, sub.File, i, err)
			}
			if shaped && !checked {
				seen.put(key, true)
			}
		}
		if s.deps.Check != nil {
			if err := s.deps.Check(*j); err != nil {
				return fmt.Errorf("%w: %s: job %d: %v", ErrInvalid, sub.File, i, err)
			}
		}
		i++
		return nil
	})
}

// plainSlots reports whether no slot holds what validateJob refuses: a NUL byte, or a
// control character in a name.
func plainSlots(slots []slot) bool {
	for _, sl := range slots {
		if sl.s != nil && (strings.IndexByte(*sl.s, 0) >= 0 || sl.name && strings.IndexFunc(*sl.s, isControl) >= 0) {
			return false
		}
	}
	return true
}

// window is a batch of submitted events and the one buffer their payloads share.
type window struct {
	events []events.Event
	data   []byte
	// ids and eventIDs hold the window's job and event IDs, 26 bytes each: the IDs of a
	// million jobs, which Accepted keeps, are a few hundred strings to the collector.
	ids, eventIDs string
}

// reset empties the window for the next batch. The payloads' buffer is a new one, as
// large as the last: a store may keep the events it was given (Data included).
func (w *window) reset() {
	w.events, w.data = w.events[:0], make([]byte, 0, cap(w.data))
	w.ids, w.eventIDs = "", ""
}

// appender links and encodes a stream's jobs.
type appender struct {
	s        *Service
	sub      Submission
	st       stamper
	now      time.Time
	parent   string
	children events.IDRange
	eventIDs events.IDRange // the submitted events' IDs, one per job
	sp       *splicer
}

// expand is the second expansion: the session is sent alone in the first window, its
// children follow in windows of streamWindow.
func (a *appender) expand(ctx context.Context, t *dds.Topology, full chan<- *window, empty <-chan *window) error {
	w := <-empty
	i := 0
	err := t.EachShared(func(j *events.Job) error {
		a.st.stamp(j, i)
		if err := a.add(w, j, i); err != nil {
			return err
		}
		i++
		if i == 1 || len(w.events) == streamWindow {
			full <- w
			select {
			case w = <-empty:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	})
	if err == nil && len(w.events) > 0 {
		full <- w
	}
	return err
}

// add links the i-th job and appends its submitted event to the window.
func (a *appender) add(w *window, j *events.Job, i int) error {
	j.Submitter = a.sub.Submitter
	route := ""
	if j.Kind == events.KindGroup {
		j.ID, route = a.parent, events.RouteGroup
		if a.children.Count > events.ChildListMax {
			j.ChildRange = &a.children
		} else {
			j.Children = a.children.IDs()
		}
	} else {
		k := len(w.events)
		if k == 0 {
			n := min(streamWindow, a.children.Count-(i-1))
			w.ids = string(a.children.AppendText(nil, i-1, n))
			w.eventIDs = string(a.eventIDs.AppendText(nil, i, n))
		}
		j.ID, j.Parent = w.ids[k*ulidLen:(k+1)*ulidLen], a.parent
	}
	eventID := a.eventIDs.At(0)
	if j.Kind != events.KindGroup {
		k := len(w.events)
		eventID = w.eventIDs[k*ulidLen : (k+1)*ulidLen]
	}
	anchorDeadline(j, a.now)
	start := len(w.data)
	var err error
	if w.data, err = a.sp.appendJob(w.data, j); err != nil {
		return fmt.Errorf("encoding job %s: %w", j.ID, err)
	}
	// When w.data grows it moves, and the payloads before stay where they were.
	w.events = append(w.events, events.Event{ID: eventID, Name: events.Submitted, JobID: j.ID, Route: route,
		Time: a.now.UTC(), Principal: a.sub.Submitter, Data: json.RawMessage(w.data[start:len(w.data):len(w.data)])})
	return nil
}

// appendWindow appends a window: the session alone (its children point at it), or
// instances all at once.
func (s *Service) appendWindow(ctx context.Context, w *window, acc *Accepted) error {
	if len(w.events) == 1 && w.events[0].Route == events.RouteGroup {
		e := w.events[0]
		if _, err := s.deps.Store.Create(ctx, e); err != nil {
			return fmt.Errorf("storing job %s: %w", e.JobID, err)
		}
		acc.Jobs = append(acc.Jobs, e.JobID)
		return nil
	}
	errs := s.createAll(ctx, w.events)
	for i, e := range w.events {
		if errs[i] != nil {
			return fmt.Errorf("storing job %s: %w", e.JobID, errs[i])
		}
		acc.Jobs = append(acc.Jobs, e.JobID)
	}
	return nil
}

// stamper records the original document on the parent and its place on every instance,
// as stamp does for a whole list.
type stamper struct {
	sub    Submission
	digest string
}

func newStamper(sub Submission) stamper {
	sum := sha256.Sum256(sub.Data)
	return stamper{sub: sub, digest: hex.EncodeToString(sum[:])}
}

func (st stamper) stamp(j *events.Job, i int) {
	o := &j.Original
	o.Format, o.ContentType, o.File, o.SHA256 = FormatDDS, st.sub.ContentType, st.sub.File, st.digest
	if i == 0 {
		o.Bytes = st.sub.Data
	} else {
		o.Index = i
	}
}
