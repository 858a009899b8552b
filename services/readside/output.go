package readside

import (
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"net/http"
	"path"
	"strconv"
	"sync"
	"time"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/pkg/cluster"
	"github.com/gridwire/gridwire/pkg/httpapi"
	"github.com/gridwire/gridwire/pkg/sshx"
	"github.com/gridwire/gridwire/pkg/target"
)

// fileReader reads a piece of a file on one host (pkg/target's Local and SSH).
type fileReader interface {
	ReadFrom(ctx context.Context, path string, offset int64, max int) (target.Chunk, error)
}

// targets reaches the hosts of the configured clusters to read jobs' output: this host
// for a fork cluster, the job's host over SFTP for an SSH one (a batch cluster is one of
// these: its jobs write their output in their working directory on its shared file
// system, as every job does). SSH pools are opened on first use and closed by Close.
type targets struct {
	clusters []cluster.Cluster
	log      *slog.Logger

	mu    sync.Mutex
	pools map[string]*sshx.Pool // by cluster name
}

func newTargets(clusters []cluster.Cluster, log *slog.Logger) *targets {
	return &targets{clusters: clusters, log: log, pools: map[string]*sshx.Pool{}}
}

// reader is the reader of the host a job ran on.
func (t *targets) reader(clusterName, host string) (fileReader, error) {
	var cl cluster.Cluster
	found := false
	for _, c := range t.clusters {
		if c.Name == clusterName {
			cl, found = c, true
		}
	}
	switch {
	case !found:
		return nil, httpapi.Errorf(http.StatusNotFound, "output_unreachable",
			"cluster %s is not in this server's config: its jobs' output cannot be reached from here", clusterName)
	case cl.Kind != cluster.KindSSH:
		return target.Local{}, nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	p := t.pools[cl.Name]
	if p == nil {
		var err error
		if p, err = target.NewPool(cl, t.log); err != nil {
			return nil, err
		}
		t.pools[cl.Name] = p
	}
	return target.SSH{Pool: p, Addr: host}, nil
}

// Close closes the SSH pools.
func (t *targets) Close() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for name, p := range t.pools {
		_ = p.Close()
		delete(t.pools, name)
	}
}

// Output polling: how much is read at once, and how long a follower waits for more.
const (
	outputChunk     = 256 << 10
	outputPollFirst = 200 * time.Millisecond
	outputPollMax   = time.Second
)

// outputRequest is what GET /v1/jobs/{id}/logs asks for.
type outputRequest struct {
	file   string // events.StdoutFile or events.StderrFile
	offset int64  // from here; negative: this many bytes before the end
	follow bool   // until the job has ended and every byte is sent
}

func outputRequestOf(r *http.Request) (outputRequest, error) {
	q := r.URL.Query()
	if err := knownParams(q, "stream", "offset", "follow"); err != nil {
		return outputRequest{}, err
	}
	req := outputRequest{file: events.StdoutFile}
	switch s := q.Get("stream"); s {
	case "", "stdout":
	case "stderr":
		req.file = events.StderrFile
	default:
		return req, httpapi.Errorf(http.StatusBadRequest, "bad_stream", "stream: %q is not stdout or stderr", s)
	}
	if o := q.Get("offset"); o != "" {
		n, err := strconv.ParseInt(o, 10, 64)
		if err != nil {
			return req, httpapi.Errorf(http.StatusBadRequest, "bad_offset", "offset: %q is not a byte offset (negative: from the end)", o)
		}
		req.offset = n
	}
	switch f := q.Get("follow"); f {
	case "", "false", "0":
	case "true", "1":
		req.follow = true
	default:
		return req, httpapi.Errorf(http.StatusBadRequest, "bad_follow", "follow: %q is not true or false", f)
	}
	return req, nil
}

// output serves a job's standard output or error as it is in the job's working
// directory on its target (text/plain, the bytes as the program wrote them): all of it,
// from ?offset=, or with ?follow=true as it grows until the job has ended. The header
// Gridwire-Output-Offset says where the body starts in the file.
func (a *api) output(w http.ResponseWriter, r *http.Request) {
	req, err := outputRequestOf(r)
	if err != nil {
		httpapi.WriteError(w, err)
		return
	}
	id := r.PathValue("id")
	st, err := a.state(r.Context(), id)
	if err != nil {
		httpapi.WriteError(w, err)
		return
	}
	if !req.follow {
		if err := outputStarted(st); err != nil {
			httpapi.WriteError(w, err)
			return
		}
	}
	o := &outputStream{a: a, id: id, req: req, w: w}
	o.serve(r.Context(), st)
}

// state is a job's state folded from its history.
func (a *api) state(ctx context.Context, id string) (events.State, error) {
	evs, err := a.load(ctx, id)
	if err != nil {
		return events.State{}, err
	}
	st, _ := foldPrefix(evs)
	return st, nil
}

// outputStarted says why a job has no output to read yet, or ever.
func outputStarted(st events.State) error {
	switch {
	case st.Incarnation != nil && st.Host != "":
		return nil
	case st.Job != nil && st.Job.Kind == events.KindGroup:
		return httpapi.Errorf(http.StatusNotFound, "no_output", "job %s is a group (%s) and runs nothing itself: its children have the output (gridwire status %s lists them)",
			st.JobID, groupSize(st), st.JobID)
	case st.Status.Terminal():
		return httpapi.Errorf(http.StatusNotFound, "no_output", "job %s ended %s without running: it has no output", st.JobID, st.Status)
	case st.Incarnation == nil && st.Status != events.StatusSubmitted:
		return httpapi.Errorf(http.StatusNotFound, "no_output", "job %s did not run through gridwire: its output is not where gridwire can read it", st.JobID)
	}
	return httpapi.Errorf(http.StatusConflict, "not_started", "job %s is %s: its output appears once it runs (follow=true waits for it)", st.JobID, st.Status)
}

// groupSize says how many children a group has, as its record knows it.
func groupSize(st events.State) string {
	n := st.Job.NumChildren()
	if st.Group != nil && st.Group.Children > 0 {
		n = st.Group.Children
	}
	if n == 1 {
		return "1 child"
	}
	return strconv.Itoa(n) + " children"
}

// outputStream writes one response of output.
type outputStream struct {
	a       *api
	id      string
	req     outputRequest
	w       http.ResponseWriter
	started bool // the response's header is written
}

func (o *outputStream) serve(ctx context.Context, st events.State) {
	wait := outputPollFirst
	off := o.req.offset
	for {
		if err := outputStarted(st); err != nil {
			var apiErr *httpapi.Error
			if errors.As(err, &apiErr) && apiErr.Code == "not_started" {
				if !o.pause(ctx, &wait) {
					return
				}
				if st, err = o.a.state(ctx, o.id); err != nil {
					o.fail(err)
					return
				}
				continue
			}
			o.fail(err)
			return
		}
		more, err := o.copy(ctx, st, &off)
		switch {
		case err != nil:
			o.fail(err)
			return
		case more:
			wait = outputPollFirst
			continue
		case !o.req.follow || st.Status.Terminal():
			o.begin(off) // an empty output still answers 200
			return
		}
		if !o.pause(ctx, &wait) {
			return
		}
		if st, err = o.a.state(ctx, o.id); err != nil {
			o.fail(err)
			return
		}
	}
}

// copy sends what the file holds past off, up to one chunk, and reports whether there
// may be more right away. The state st was folded before the read, so a job that had
// ended by then has all its output in the file.
func (o *outputStream) copy(ctx context.Context, st events.State, off *int64) (bool, error) {
	rd, err := o.a.targets.reader(st.Cluster, st.Host)
	if err != nil {
		return false, err
	}
	file := path.Join(st.Incarnation.WorkDir, o.req.file)
	ch, err := rd.ReadFrom(ctx, file, max(*off, 0), outputChunk)
	if errors.Is(err, fs.ErrNotExist) {
		if d := st.DirectoryDeleted; d != nil && st.Status.Terminal() {
			return false, httpapi.Errorf(http.StatusGone, "output_gone", "job %s: %s is gone: its cluster's retention removed %s on %s at %s (%s)",
				o.id, o.req.file, st.Incarnation.WorkDir, st.Host, st.UpdatedAt.UTC().Format(time.RFC3339), d.Script)
		}
		if st.Status.Terminal() {
			return false, httpapi.Errorf(http.StatusGone, "output_gone", "job %s: %s is gone from %s on %s (the working directory was cleaned up)",
				o.id, o.req.file, st.Incarnation.WorkDir, st.Host)
		}
		return false, nil // not written yet
	}
	if err != nil {
		return false, httpapi.Errorf(http.StatusBadGateway, "output_unreachable", "job %s: reading its output on %s: %v", o.id, st.Host, err)
	}
	if *off < 0 { // from the end: now that the size is known
		*off = max(ch.Size+*off, 0)
		if ch, err = rd.ReadFrom(ctx, file, *off, outputChunk); err != nil {
			return false, httpapi.Errorf(http.StatusBadGateway, "output_unreachable", "job %s: reading its output on %s: %v", o.id, st.Host, err)
		}
	}
	o.begin(*off)
	if len(ch.Data) == 0 {
		return false, nil
	}
	if _, err := o.w.Write(ch.Data); err != nil {
		return false, err
	}
	if f, ok := o.w.(http.Flusher); ok {
		f.Flush()
	}
	*off += int64(len(ch.Data))
	return *off < ch.Size, nil
}

// begin writes the response's header once.
func (o *outputStream) begin(off int64) {
	if o.started {
		return
	}
	o.started = true
	h := o.w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Gridwire-Output-Offset", strconv.FormatInt(max(off, 0), 10))
	o.w.WriteHeader(http.StatusOK)
}

// fail answers with err when nothing is sent yet; after that, the body just ends (the
// client resumes from the bytes it has).
func (o *outputStream) fail(err error) {
	if !o.started {
		httpapi.WriteError(o.w, err)
		return
	}
	o.a.log.Warn("job output stream ended", "job", o.id, "err", err)
}

// pause waits before the next poll, longer each time nothing came; false when ctx ended.
func (o *outputStream) pause(ctx context.Context, wait *time.Duration) bool {
	if o.started {
		if f, ok := o.w.(http.Flusher); ok {
			f.Flush()
		}
	}
	t := time.NewTimer(*wait)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
	}
	*wait = min(*wait*3/2, outputPollMax)
	return true
}
