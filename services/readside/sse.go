package readside

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/gridwire/gridwire/events"
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
	if err != nil {
		httpapi.WriteError(w, err)
		return
	}
	cons, err := a.js.OrderedConsumer(r.Context(), events.Stream, cfg)
	if err != nil {
		httpapi.WriteError(w, err)
		return
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(256))
	if err != nil {
		httpapi.WriteError(w, err)
		return
	}
	defer it.Stop()
	stop := context.AfterFunc(r.Context(), it.Stop)
	defer stop()
	msgs := make(chan jetstream.Msg, 256)
	go func() {
		defer close(msgs)
		for {
			m, err := it.Next()
			if err != nil {
				return
			}
			msgs <- m
		}
	}()
	defer func() {
		it.Stop()
		for range msgs {
		}
	}()
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	fmt.Fprint(w, ": gridwire event stream\n\n")
	flusher.Flush()
	sendSSE(r.Context(), w, flusher, msgs)
}

// streamConfig reads where a stream starts and what it carries from the request.
func streamConfig(r *http.Request) (jetstream.OrderedConsumerConfig, error) {
	q := r.URL.Query()
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
func sendSSE(ctx context.Context, w io.Writer, flusher http.Flusher, msgs <-chan jetstream.Msg) {
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
			if err := writeSSE(w, m); err != nil {
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
func writeSSE(w io.Writer, m jetstream.Msg) error {
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
