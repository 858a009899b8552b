package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/pkg/httpapi"
	"github.com/gridwire/gridwire/services/ingest"
	"github.com/spf13/pflag"
)

// client talks to a gridwire server's HTTP API.
type client struct {
	base    string
	token   string
	http    *http.Client
	retries int       // attempts to reach an unreachable server before giving up (0: 1)
	log     io.Writer // where retries are announced (nil: nowhere)
	backoff time.Duration
}

type clientFlags struct {
	server  string
	token   string
	json    bool
	utc     bool
	retries int
}

func (f *clientFlags) register(fs *pflag.FlagSet, e *env) {
	fs.StringVar(&f.server, "server", "", "gridwire server: host:port or URL (default $GRIDWIRE_SERVER, else http://127.0.0.1:8080)")
	fs.StringVar(&f.token, "token", "", "bearer token (default $GRIDWIRE_TOKEN)")
	fs.BoolVar(&f.json, "json", false, "print JSON (errors too, on stderr)")
	fs.BoolVar(&f.utc, "utc", false, "print times in UTC (RFC 3339) instead of local time")
	fs.IntVar(&f.retries, "retries", 5, "attempts to reach an unreachable server before giving up")
	// Taken from the environment after the flags are made, so that --help, which prints
	// a flag's default, never prints the caller's token.
	f.server = firstOf(e.getenv("GRIDWIRE_SERVER"), "http://127.0.0.1:8080")
	f.token = e.getenv("GRIDWIRE_TOKEN")
}

// client returns the client the flags describe; a server address without a scheme is
// taken as http://.
func (f *clientFlags) client(e *env) (*client, error) {
	base, err := serverURL(f.server)
	if err != nil {
		return nil, err
	}
	if f.retries < 1 {
		return nil, usageErrorf("--retries %d: must be at least 1", f.retries)
	}
	return &client{base: base, token: f.token, http: &http.Client{}, retries: f.retries, log: e.stderr,
		backoff: 250 * time.Millisecond}, nil
}

// serverURL turns --server into a base URL: "host:port" means http://host:port.
func serverURL(s string) (string, error) {
	s = strings.TrimRight(strings.TrimSpace(s), "/")
	if !strings.Contains(s, "://") {
		s = "http://" + s
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" {
		return "", usageErrorf("--server %q: want host:port or http(s)://host[:port][/path]", s)
	}
	return s, nil
}

// send sends a request, retrying what never reached the server (bounded, each retry
// announced); a request whose body cannot be sent again is tried once.
func (c *client) send(req *http.Request) (*http.Response, error) {
	attempts := max(c.retries, 1)
	wait := c.backoff
	for attempt := 1; ; attempt++ {
		resp, err := c.http.Do(req)
		if err == nil {
			return resp, nil
		}
		if req.Context().Err() != nil {
			return nil, req.Context().Err()
		}
		// A request with an idempotency key may be sent again even if it reached the
		// server: a repeat returns what the first did.
		again := notSent(err) || req.Method == http.MethodGet || req.Header.Get(ingest.HeaderIdempotencyKey) != ""
		retry := attempt < attempts && (req.Body == nil || req.GetBody != nil) && again
		if !retry {
			return nil, &unreachableError{server: c.base, attempts: attempt, err: err}
		}
		c.announce(err, attempt, attempts, wait)
		if err := sleep(req.Context(), wait); err != nil {
			return nil, err
		}
		wait = min(wait*2, 4*time.Second)
		if req.GetBody != nil {
			if req.Body, err = req.GetBody(); err != nil {
				return nil, err
			}
		}
	}
}

func (c *client) announce(err error, attempt, attempts int, wait time.Duration) {
	if c.log != nil {
		fmt.Fprintf(c.log, "gridwire: cannot reach %s (%v); attempt %d of %d, retrying in %s\n",
			c.base, rootCause(err), attempt, attempts, wait)
	}
}

// notSent reports whether a transport error happened before the request was sent (the
// connection was never made), so even a POST may be sent again.
func notSent(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

func rootCause(err error) error {
	for {
		next := errors.Unwrap(err)
		if next == nil {
			return err
		}
		err = next
	}
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func (c *client) request(ctx context.Context, method, path string, body io.Reader, contentType string) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return nil, err
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	return req, nil
}

func (c *client) do(ctx context.Context, method, path string, body io.Reader, contentType string, out any) error {
	req, err := c.request(ctx, method, path, body, contentType)
	if err != nil {
		return err
	}
	return c.exchange(req, out)
}

// exchange sends a request and decodes its JSON answer into out (nil: ignore it), or
// returns the server's error.
func (c *client) exchange(req *http.Request, out any) error {
	resp, err := c.send(req)
	if err != nil {
		return err
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
	Path        string    `json:"path"`
	Children    int       `json:"children"`
	// Group counts a parent record's children by state.
	Group *events.GroupSummary `json:"group"`
	// Attempt is the current attempt of a restarted job; Restarting says its terminal
	// state is about to be followed by another attempt.
	Attempt    int    `json:"attempt"`
	Restarting bool   `json:"restarting"`
	Seq        uint64 `json:"seq"`
}

// label is what a row names a job by: its name, else its place in the description (a
// JRDL document's job[1], which has no name of its own).
func (v jobView) label() string {
	if v.Name != "" {
		return v.Name
	}
	return v.Path
}

func (c *client) job(ctx context.Context, id string) (jobView, error) {
	var v jobView
	err := c.do(ctx, http.MethodGet, "/v1/jobs/"+url.PathEscape(id), nil, "", &v)
	return v, err
}

// jobAsOf is a job as the events recorded by t fold it (GET /v1/jobs/{id}?as_of=).
func (c *client) jobAsOf(ctx context.Context, id string, t time.Time) (jobView, error) {
	var v jobView
	q := url.Values{"as_of": {t.UTC().Format(time.RFC3339Nano)}}
	err := c.do(ctx, http.MethodGet, "/v1/jobs/"+url.PathEscape(id)+"?"+q.Encode(), nil, "", &v)
	return v, err
}

func (c *client) history(ctx context.Context, id string) ([]events.Event, error) {
	var evs []events.Event
	err := c.do(ctx, http.MethodGet, "/v1/jobs/"+url.PathEscape(id)+"/events", nil, "", &evs)
	return evs, err
}

// stream follows the server's SSE stream, calling fn for each event until fn returns
// false or the context ends. A dropped connection is resumed after the last event seen
// (Last-Event-ID), so no event is skipped or shown twice; each reconnection is announced,
// and after c.retries attempts in a row that reach no server the stream gives up. An
// error the server answers with ends the stream.
func (c *client) stream(ctx context.Context, q url.Values, fn func(events.Event) bool) error {
	attempts := max(c.retries, 1)
	wait, failures := c.backoff, 0
	for {
		last, connected, done, err := c.streamOnce(ctx, q, nil, fn)
		if done || ctx.Err() != nil {
			return ctx.Err()
		}
		var apiErr *httpapi.Error
		if errors.As(err, &apiErr) {
			return err
		}
		if last != "" {
			q.Set("after", last)
		}
		if connected {
			failures, wait = 0, c.backoff
			if c.log != nil {
				fmt.Fprintf(c.log, "gridwire: the event stream from %s ended (%v); resuming after seq %s in %s\n",
					c.base, rootCause(err), firstOf(q.Get("after"), "(start)"), wait)
			}
		} else {
			if failures++; failures >= attempts {
				return &unreachableError{server: c.base, attempts: failures, err: err}
			}
			c.announce(err, failures, attempts, wait)
		}
		if err := sleep(ctx, wait); err != nil {
			return err
		}
		wait = nextBackoff(wait)
	}
}

// nextBackoff is the wait before the next attempt to reach the event stream: twice the
// last, from 10 ms, up to 4 s.
func nextBackoff(wait time.Duration) time.Duration {
	return min(max(wait*2, 10*time.Millisecond), 4*time.Second)
}

// streamOnce reads one connection of the stream. It returns the sequence of the last
// event it handed to fn, whether the server answered, and done when fn asked to stop.
// opened, when not nil, is called once the server has accepted the stream: its reader
// exists on the server, and every event stored from then on will come.
func (c *client) streamOnce(ctx context.Context, q url.Values, opened func(), fn func(events.Event) bool) (last string, connected, done bool, err error) {
	req, err := c.request(ctx, http.MethodGet, "/v1/events?"+q.Encode(), nil, "")
	if err != nil {
		return "", false, false, err
	}
	req.Header.Set("Accept", "text/event-stream")
	resp, err := c.http.Do(req)
	if err != nil {
		return "", false, false, err
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		data, _ := io.ReadAll(resp.Body)
		return "", true, false, httpapi.DecodeError(resp.StatusCode, data)
	}
	if opened != nil {
		opened()
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "data: ") {
			continue
		}
		var e events.Event
		if err := json.Unmarshal([]byte(line[len("data: "):]), &e); err != nil {
			return last, true, false, &httpapi.Error{Code: "malformed_stream", Detail: err.Error()}
		}
		last = strconv.FormatUint(e.Seq, 10)
		if !fn(e) {
			return last, true, true, nil
		}
	}
	if err := sc.Err(); err != nil {
		return last, true, false, err
	}
	return last, true, false, io.ErrUnexpectedEOF
}
