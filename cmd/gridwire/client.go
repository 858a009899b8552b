package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/pkg/httpapi"
	"github.com/spf13/pflag"
)

// client talks to a gridwire server's HTTP API.
type client struct {
	base  string
	token string
	http  *http.Client
}

type clientFlags struct {
	server string
	token  string
	json   bool
}

func (f *clientFlags) register(fs *pflag.FlagSet, e *env) {
	def := firstOf(e.getenv("GRIDWIRE_SERVER"), "http://127.0.0.1:8080")
	fs.StringVar(&f.server, "server", def, "gridwire server URL (default $GRIDWIRE_SERVER, else http://127.0.0.1:8080)")
	fs.StringVar(&f.token, "token", e.getenv("GRIDWIRE_TOKEN"), "bearer token (default $GRIDWIRE_TOKEN)")
	fs.BoolVar(&f.json, "json", false, "print JSON")
}

func (f *clientFlags) client() *client {
	return &client{base: strings.TrimRight(f.server, "/"), token: f.token, http: &http.Client{}}
}

func (c *client) do(ctx context.Context, method, path string, body io.Reader, contentType string, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return err
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("reaching gridwire at %s: %w", c.base, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode >= 300 {
		return httpapi.DecodeError(resp.StatusCode, data)
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(data, out)
}

// jobView mirrors the server's job view.
type jobView struct {
	ID          string    `json:"id"`
	Name        string    `json:"name"`
	Kind        string    `json:"kind"`
	Parent      string    `json:"parent"`
	Status      string    `json:"status"`
	NativeState string    `json:"native_state"`
	Cluster     string    `json:"cluster"`
	NativeID    string    `json:"native_id"`
	ExitCode    *int      `json:"exit_code"`
	Reason      string    `json:"reason"`
	Submitter   string    `json:"submitter"`
	SubmittedAt time.Time `json:"submitted_at"`
	StartedAt   time.Time `json:"started_at"`
	EndedAt     time.Time `json:"ended_at"`
	Events      int       `json:"events"`
}

func (c *client) job(ctx context.Context, id string) (jobView, error) {
	var v jobView
	err := c.do(ctx, http.MethodGet, "/v1/jobs/"+url.PathEscape(id), nil, "", &v)
	return v, err
}

func (c *client) history(ctx context.Context, id string) ([]events.Event, error) {
	var evs []events.Event
	err := c.do(ctx, http.MethodGet, "/v1/jobs/"+url.PathEscape(id)+"/events", nil, "", &evs)
	return evs, err
}

// stream follows the server's SSE stream, calling fn for each event until fn returns
// false or the context ends. A dropped connection is resumed after the last event seen
// (Last-Event-ID), so no event is skipped or shown twice; an error the server answers
// with ends the stream.
func (c *client) stream(ctx context.Context, q url.Values, fn func(events.Event) bool) error {
	wait := 100 * time.Millisecond
	for {
		last, done, err := c.streamOnce(ctx, q, fn)
		if done || ctx.Err() != nil {
			return ctx.Err()
		}
		var apiErr *httpapi.Error
		if errors.As(err, &apiErr) {
			return err
		}
		if last != "" {
			q.Set("after", last)
			wait = 100 * time.Millisecond
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
		wait = min(wait*2, 5*time.Second)
	}
}

// streamOnce reads one connection of the stream. It returns the sequence of the last
// event it handed to fn, and done when fn asked to stop.
func (c *client) streamOnce(ctx context.Context, q url.Values, fn func(events.Event) bool) (string, bool, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/v1/events?"+q.Encode(), nil)
	if err != nil {
		return "", false, err
	}
	req.Header.Set("Accept", "text/event-stream")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return "", false, fmt.Errorf("reaching gridwire at %s: %w", c.base, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		data, _ := io.ReadAll(resp.Body)
		return "", false, httpapi.DecodeError(resp.StatusCode, data)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	last := ""
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "data: ") {
			continue
		}
		var e events.Event
		if err := json.Unmarshal([]byte(line[len("data: "):]), &e); err != nil {
			return last, false, &httpapi.Error{Code: "malformed_stream", Detail: err.Error()}
		}
		last = strconv.FormatUint(e.Seq, 10)
		if !fn(e) {
			return last, true, nil
		}
	}
	if err := sc.Err(); err != nil {
		return last, false, err
	}
	return last, false, io.ErrUnexpectedEOF
}
