package readside

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/pkg/bus"
	"github.com/gridwire/gridwire/pkg/httpapi"
	"github.com/nats-io/nats.go/jetstream"
)

// sseKeepAlive is how often an idle stream sends a comment, so proxies keep it open.
const sseKeepAlive = 15 * time.Second

// stream serves the event log as Server-Sent Events, each with id = stream sequence.
// It resumes after Last-Event-ID (or ?after=SEQ) with the next stored event, so a
// reconnecting client misses nothing and sees nothing twice; ?job=ID narrows it to one
// job (from the job's start unless resuming). Without either it starts with new events.
func (a *api) stream(w http.ResponseWriter, r *http.Request) {
	flusher, ok := w.(http.Flusher)
	if !ok {
		httpapi.WriteError(w, errors.New("streaming unsupported"))
		return
	}
	cfg, err := streamConfig(r)
	if err == nil {
		err = a.checkStream(r.Context(), r.URL.Query().Get("job"), cfg)
	}
	if err != nil {
		httpapi.WriteError(w, err)
		return
	}
	asCloudEvents := r.URL.Query().Get("format") == "cloudevents"
	cons, err := a.js.OrderedConsumer(r.Context(), events.Stream, cfg)
	if err != nil {
		httpapi.WriteError(w, err)
		return
	}
	defer bus.Forget(r.Context(), bus.OfStream(a.js, events.Stream), cons)
	it, err := cons.Messages(jetstream.PullMaxMessages(256))
	if err != nil {
		httpapi.WriteError(w, err)
		return
	}
	defer it.Stop()
	stop := context.AfterFunc(r.Context(), it.Stop)
	defer stop()
	msgs, drain := bus.Feed(it, 256)
	defer drain()
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	fmt.Fprint(w, ": gridwire event stream\n\n")
	flusher.Flush()
	sendSSE(r.Context(), w, flusher, msgs, asCloudEvents)
}

// streamConfig reads where a stream starts and what it carries from the request.
func streamConfig(r *http.Request) (jetstream.OrderedConsumerConfig, error) {
	q := r.URL.Query()
	if err := knownParams(q, "job", "after", "format"); err != nil {
		return jetstream.OrderedConsumerConfig{}, err
	}
	if f := q.Get("format"); f != "" && f != "cloudevents" && f != "gridwire" {
		return jetstream.OrderedConsumerConfig{}, httpapi.Errorf(http.StatusBadRequest, "bad_format", "format: %q is not gridwire or cloudevents", f)
	}
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: []string{events.SubjectAll}, DeliverPolicy: jetstream.DeliverNewPolicy}
	if id := q.Get("job"); id != "" {
		cfg.FilterSubjects = []string{events.JobFilter(id)}
		cfg.DeliverPolicy = jetstream.DeliverAllPolicy
	}
	last := r.Header.Get("Last-Event-ID")
	if last == "" {
		last = q.Get("after")
	}
	if last != "" {
		seq, err := strconv.ParseUint(last, 10, 64)
		if err != nil {
			return cfg, httpapi.Errorf(http.StatusBadRequest, "bad_last_event_id", "Last-Event-ID: %q is not a stream sequence", last)
		}
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, seq+1
	}
	return cfg, nil
}

// sendSSE writes events as they come, flushing when none is waiting, so a burst goes
// out in few writes and a lone event at once.
func sendSSE(ctx context.Context, w io.Writer, flusher http.Flusher, msgs <-chan jetstream.Msg, asCloudEvents bool) {
	idle := time.NewTicker(sseKeepAlive)
	defer idle.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-idle.C:
			if _, err := io.WriteString(w, ": keep-alive\n\n"); err != nil {
				return
			}
			flusher.Flush()
		case m, ok := <-msgs:
			if !ok {
				return
			}
			if err := writeSSE(w, m, asCloudEvents); err != nil {
				return
			}
			if len(msgs) == 0 {
				flusher.Flush()
			}
		}
	}
}

// writeSSE writes one stored event as an SSE message: id is its stream sequence, event
// its name, data the event as JSON (with seq, subject, route and hash).
func writeSSE(w io.Writer, m jetstream.Msg, asCloudEvent bool) error {
	meta, err := m.Metadata()
	if err != nil {
		return err
	}
	e, err := events.DecodeStored(m.Data(), m.Subject(), meta.Sequence.Stream)
	if err != nil {
		return nil // not an event gridwire can show; the audit reports it
	}
	e.Hash = events.HashOf(m.Data())
	b, err := json.Marshal(e)
	if asCloudEvent {
		var compact bytes.Buffer // the stored CloudEvent, on one line
		if err = json.Compact(&compact, m.Data()); err == nil {
			b = compact.Bytes()
		}
	}
	if err != nil {
		// Data that is not JSON (only a forged event has it): shown without its data, so
		// one bad event never ends every stream that reaches it.
		e.Data = nil
		if b, err = json.Marshal(e); err != nil {
			return err
		}
	}
	buf := make([]byte, 0, len(b)+64)
	buf = append(buf, "id: "...)
	buf = strconv.AppendUint(buf, e.Seq, 10)
	buf = append(buf, "\nevent: "...)
	buf = append(buf, e.Name...)
	buf = append(buf, "\ndata: "...)
	buf = append(buf, b...)
	buf = append(buf, "\n\n"...)
	_, err = w.Write(buf)
	return err
}

// checkStream refuses a stream that could never send anything or would skip events: one
// of a job the log does not hold, or one resuming after a sequence past the end of the
// log (a cursor from another log) or before its first event (events gone since).
func (a *api) checkStream(ctx context.Context, job string, cfg jetstream.OrderedConsumerConfig) error {
	if job != "" {
		if !events.ValidRoute(job) {
			return httpapi.Errorf(http.StatusBadRequest, "bad_job_id", "job: %q is not a job ID", job)
		}
		evs, _, err := a.store.Scan(ctx, events.JobFilter(job), 1, 1)
		if err != nil {
			return err
		}
		if len(evs) == 0 {
			return httpapi.Errorf(http.StatusNotFound, "no_such_job", "no job %s", job)
		}
	}
	if cfg.DeliverPolicy != jetstream.DeliverByStartSequencePolicy {
		return nil
	}
	s, err := a.js.Stream(ctx, events.Stream)
	if err != nil {
		return err
	}
	info, err := s.Info(ctx)
	if err != nil {
		return err
	}
	after := cfg.OptStartSeq - 1
	switch {
	case after > info.State.LastSeq:
		return httpapi.Errorf(http.StatusBadRequest, "bad_last_event_id",
			"Last-Event-ID %d is past the end of the log (its last event is %d): a cursor from another server?", after, info.State.LastSeq)
	case info.State.FirstSeq > 1 && cfg.OptStartSeq < info.State.FirstSeq:
		return httpapi.Errorf(http.StatusGone, "cursor_expired",
			"Last-Event-ID %d: the log now starts at %d; the events between are gone", after, info.State.FirstSeq)
	}
	return nil
}
