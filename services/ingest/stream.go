package ingest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
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
// the session, then the instances in windows, pipelined.
func (s *Service) submitStream(ctx context.Context, sub Submission, t *dds.Topology) (Accepted, error) {
	st := newStamper(sub)
	i := 0
	err := t.Each(func(j *events.Job) error {
		st.stamp(j, i)
		if err := validateJob(*j, s.fields); err != nil {
			return fmt.Errorf("%w: %s: job %d: %v", ErrInvalid, sub.File, i, err)
		}
		if s.deps.Check != nil {
			if err := s.deps.Check(*j); err != nil {
				return fmt.Errorf("%w: %s: job %d: %v", ErrInvalid, sub.File, i, err)
			}
		}
		i++
		return nil
	})
	if err != nil {
		return Accepted{}, err
	}
	a := appender{s: s, ctx: ctx, sub: sub, now: s.deps.Now(), parent: events.NewID(), children: events.NewIDRange(t.Count())}
	a.acc = Accepted{Parent: a.parent, Jobs: make([]string, 0, t.Count()+1)}
	i = 0
	err = t.Each(func(j *events.Job) error {
		st.stamp(j, i)
		i++
		return a.add(j)
	})
	if err == nil {
		err = a.flush()
	}
	return a.acc, err
}

// appender links, encodes and appends a stream's jobs.
type appender struct {
	s        *Service
	ctx      context.Context
	sub      Submission
	now      time.Time
	parent   string
	children events.IDRange
	next     int
	window   []events.Event
	acc      Accepted
}

func (a *appender) add(j *events.Job) error {
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
		j.ID, j.Parent = a.children.At(a.next), a.parent
		a.next++
	}
	anchorDeadline(j, a.now)
	e, err := events.New(j.ID, events.Submitted, route, a.now, j)
	if err != nil {
		return err
	}
	e.Principal = a.sub.Submitter
	if j.Kind == events.KindGroup {
		// The session first, alone: its children point at it.
		if _, err := a.s.deps.Store.Create(a.ctx, e); err != nil {
			return fmt.Errorf("storing job %s: %w", j.ID, err)
		}
		a.acc.Jobs = append(a.acc.Jobs, j.ID)
		return nil
	}
	a.window = append(a.window, e)
	if len(a.window) == streamWindow {
		return a.flush()
	}
	return nil
}

func (a *appender) flush() error {
	errs := a.s.createAll(a.ctx, a.window)
	for i, e := range a.window {
		if errs[i] != nil {
			return fmt.Errorf("storing job %s: %w", e.JobID, errs[i])
		}
		a.acc.Jobs = append(a.acc.Jobs, e.JobID)
	}
	a.window = a.window[:0]
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
