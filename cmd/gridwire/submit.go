package main

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/pkg/httpapi"
	"github.com/gridwire/gridwire/services/ingest"
	"github.com/gridwire/gridwire/services/stager"
	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"
	"golang.org/x/term"
)

func submitCmd(e *env) *cobra.Command {
	f := &clientFlags{}
	var wait, follow bool
	var format, key string
	cmd := &cobra.Command{
		Use:   "submit FILE...",
		Short: "submit job descriptions; prints the job IDs",
		Long: "submit sends each file to the server, which accepts it whole or refuses it with every problem\n" +
			"it found. Local input files a description names are uploaded with it. With several files, a\n" +
			"refused one does not stop the others, and a summary says which were refused. Each file goes\n" +
			"with an idempotency key (a fresh one per file, or --idempotency-key KEY, KEY:2, KEY:3 ... for\n" +
			"the files after the first), so a submission retried after a lost answer creates nothing twice.\n" +
			"A FILE of - is a description read from standard input (its local inputs relative to the\n" +
			"current directory); the server tells its language from its content, or --format names it.",
		Example: `  gridwire submit examples/hello.json
  gridwire submit --wait job.xml           # exit 0 only if every job succeeded
  gridwire submit --follow topology.xml    # every event of every job as it happens
  gridwire submit *.json --json
  render-job | gridwire submit --wait -    # a description from standard input`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, files []string) error {
			return submit(cmd.Context(), e, f, files, format, key, wait || follow, follow)
		},
	}
	f.register(cmd.Flags(), e)
	cmd.Flags().BoolVar(&wait, "wait", false, "wait for every job's terminal state; exit 0 only if all succeeded")
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "like --wait, printing each job's events as they happen")
	cmd.Flags().StringVar(&format, "format", "", formatHelp())
	cmd.Flags().StringVar(&key, "idempotency-key", "", "the submission's key (default: a fresh one per file); the same key again returns the same jobs")
	return cmd
}

type accepted struct {
	File   string         `json:"file,omitempty"`
	Jobs   []string       `json:"jobs"`
	Parent string         `json:"parent,omitempty"`
	Error  map[string]any `json:"error,omitempty"` // why the file was refused
}

// formatHelp is the --format flag's help: every format a person may name (ptp-submit is
// the PTP endpoint's own).
func formatHelp() string {
	names := slices.DeleteFunc(slices.Clone(ingest.Formats), func(f string) bool { return f == ingest.FormatPTP })
	return "force the format (" + strings.Join(names, ", ") + ")"
}

func submit(ctx context.Context, e *env, f *clientFlags, files []string, format, key string, wait, follow bool) error {
	c, err := f.client(e)
	if err != nil {
		return err
	}
	var runnable, parents []string
	inGroup := map[string]bool{} // jobs whose parent record a wait can follow instead
	var all []accepted
	var refused []error
	if err := ingest.CheckKey(key); err != nil {
		return invalidErrorf("--idempotency-key: %v", err)
	}
	if err := oneStdin(files); err != nil {
		return err
	}
	var feed *logFeed
	if follow && key == "" {
		// Opened before the submission is sent, so that it carries every event of it.
		// Not with a key of the caller's: the same key again returns jobs an earlier
		// submission created, whose events came before the feed.
		feed = openLogFeed(ctx, c)
		defer func() {
			if feed != nil {
				feed.stop()
			}
		}()
	}
	outcomes := submitFiles(ctx, e, c, files, format, key)
	for i, file := range files {
		acc, err := outcomes[i].acc, outcomes[i].err
		if err != nil {
			var ue *unreachableError
			if len(files) == 1 || errors.As(err, &ue) || ctx.Err() != nil {
				return err // nothing more can be submitted
			}
			refused = append(refused, err)
			code, exit := classify(err)
			all = append(all, accepted{File: shown(file), Error: map[string]any{"code": code, "detail": err.Error(), "exit": exit}})
			if !f.json {
				report(e.stderr, err, false)
			}
			continue
		}
		acc.File = shown(file)
		all = append(all, acc)
		if acc.Parent != "" {
			parents = append(parents, acc.Parent)
		}
		for _, id := range acc.Jobs {
			if id != acc.Parent {
				runnable = append(runnable, id)
				inGroup[id] = acc.Parent != ""
			}
			if !f.json && !wait {
				fmt.Fprintln(e.stdout, id)
			}
		}
	}
	if len(files) > 1 && !f.json {
		summarise(e, files, all, refused)
	}
	if !wait || len(runnable) == 0 {
		if f.json {
			if err := json.NewEncoder(e.stdout).Encode(all); err != nil {
				return err
			}
		}
		if len(refused) > 0 {
			_, exit := classify(refused[0])
			return exitCode(exit)
		}
		return nil
	}
	if feed != nil && len(parents) == 0 && len(runnable) <= followAtOnce {
		// Few jobs: a stream each carries their events alone, where the feed would carry
		// every other job's too.
		feed.stop()
		feed = nil
	}
	if err := waitAll(ctx, e, c, f, runnable, parents, inGroup, follow, feed); err != nil || len(refused) == 0 {
		return err
	}
	_, exit := classify(refused[0])
	return exitCode(exit)
}

// fileOutcome is what became of one file of a submission.
type fileOutcome struct {
	acc accepted
	err error
}

// submitFiles submits each file: several in bulk requests (POST /v1/jobs/bulk, each
// file an item with its own key and its own answer), one alone. A file whose local
// inputs must be uploaded first, or every file when the server has no bulk endpoint, is
// submitted alone, as before.
func submitFiles(ctx context.Context, e *env, c *client, files []string, format, key string) []fileOutcome {
	out := make([]fileOutcome, len(files))
	alone := func(i int) { out[i].acc, out[i].err = submitFile(ctx, e, c, files[i], format, fileKey(key, i)) }
	if len(files) == 1 {
		alone(0)
		return out
	}
	var items []ingest.Item
	var index []int // items[k] is files[index[k]]
	size := 0
	flush := func() bool {
		if len(items) == 0 {
			return true
		}
		ok := submitBulk(ctx, c, files, items, index, out)
		items, index, size = nil, nil, 0
		return ok
	}
	for i, file := range files {
		data, err := e.readDescription(file)
		if err != nil {
			out[i].err = err
			continue
		}
		if len(items) == ingest.MaxBulkItems || size+2*len(data)+1024 > ingest.MaxBulkBytes {
			if !flush() {
				break
			}
		}
		items = append(items, ingest.Item{File: sentName(file), Format: format, ContentType: contentTypeOf(file),
			Description: string(data), IdempotencyKey: fileKey(key, i), Uploads: ingest.Uploads{}})
		index = append(index, i)
		size += 2*len(data) + 1024 // JSON escaping at worst doubles it
	}
	flush()
	for i := range out {
		var need *httpapi.Error
		if errors.As(out[i].err, &need) && (need.Code == codeUploadsRequired || need.Code == codeNoBulk) {
			alone(i)
		}
	}
	return out
}

// codeNoBulk marks files a server without the bulk endpoint left to be sent alone.
const codeNoBulk = "no_bulk_endpoint"

// submitBulk sends one bulk request and records each item's outcome; false when the
// request as a whole failed (the server unreachable, say: every item gets that error).
func submitBulk(ctx context.Context, c *client, files []string, items []ingest.Item, index []int, out []fileOutcome) bool {
	body, err := json.Marshal(items)
	if err != nil {
		return setAll(out, index, err)
	}
	req, err := c.request(ctx, http.MethodPost, "/v1/jobs/bulk", bytes.NewReader(body), "application/json")
	if err != nil {
		return setAll(out, index, err)
	}
	var resp struct {
		Results []ingest.Result `json:"results"`
	}
	err = c.exchange(req, &resp)
	var api *httpapi.Error
	if errors.As(err, &api) && (api.Status == http.StatusNotFound || api.Status == http.StatusMethodNotAllowed) {
		err = &httpapi.Error{Status: api.Status, Code: codeNoBulk, Detail: api.Detail}
	}
	if err == nil && len(resp.Results) != len(items) {
		err = fmt.Errorf("the server answered %d results for %d files", len(resp.Results), len(items))
	}
	if err != nil {
		return setAll(out, index, err)
	}
	for k, r := range resp.Results {
		i := index[k]
		if r.Error != nil {
			r.Error.Status = r.Status
			out[i].err = fmt.Errorf("%s: %w", shown(files[i]), r.Error)
			continue
		}
		out[i].acc = accepted{Jobs: r.Jobs, Parent: r.Parent}
	}
	return true
}

func setAll(out []fileOutcome, index []int, err error) bool {
	for _, i := range index {
		out[i].err = err
	}
	return false
}

// stdinName is how a description read from standard input ("-") is named: in the
// server's messages, the job's recorded original, and the summary of several files.
const stdinName = "<stdin>"

// shown is how a file is named in what submit prints.
func shown(file string) string {
	if file == "-" {
		return stdinName
	}
	return file
}

// sentName is the file name a description is sent under.
func sentName(file string) string { return filepath.Base(shown(file)) }

// oneStdin refuses a command line that names standard input ("-") more than once.
func oneStdin(files []string) error {
	n := 0
	for _, f := range files {
		if f == "-" {
			n++
		}
	}
	if n > 1 {
		return usageErrorf("- (standard input) is given %d times; it holds one description", n)
	}
	return nil
}

// readInput reads a description for an offline verb: a file whole, or standard input.
func (e *env) readInput(file string) ([]byte, error) {
	if file == "-" {
		return e.readDescription(file)
	}
	return os.ReadFile(file)
}

// readDescription reads a description file, or standard input for "-", refused before
// anything is sent when it is over the size a server accepts.
func (e *env) readDescription(file string) ([]byte, error) {
	if file == "-" {
		e.stdinOnce.Do(func() { e.stdinData, e.stdinErr = e.readStdin() })
		return e.stdinData, e.stdinErr
	}
	if fi, err := os.Stat(file); err != nil {
		return nil, err
	} else if fi.Size() > ingest.MaxDocumentBytes {
		return nil, invalidErrorf("%s: %d bytes, over the limit of %d bytes for one description; nothing was sent",
			file, fi.Size(), ingest.MaxDocumentBytes)
	}
	return os.ReadFile(file)
}

// readStdin reads one description from standard input, saying so first when that is a
// terminal, where the read waits for the person to type it.
func (e *env) readStdin() ([]byte, error) {
	if f, ok := e.stdin.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		fmt.Fprintln(e.stderr, "reading a description from standard input; end it with Ctrl-D")
	}
	data, err := io.ReadAll(io.LimitReader(e.stdin, ingest.MaxDocumentBytes+1))
	switch {
	case err != nil:
		return nil, fmt.Errorf("reading standard input: %w", err)
	case len(data) > ingest.MaxDocumentBytes:
		return nil, invalidErrorf("%s: over the limit of %d bytes for one description; nothing was sent", stdinName, ingest.MaxDocumentBytes)
	case len(bytes.TrimSpace(data)) == 0:
		return nil, invalidErrorf("%s: empty: no description was given on standard input; nothing was sent", stdinName)
	}
	return data, nil
}

// submitFile submits one description: refused before anything is sent when it is over
// the size a server accepts.
func submitFile(ctx context.Context, e *env, c *client, file, format, key string) (accepted, error) {
	var acc accepted
	data, err := e.readDescription(file)
	if err != nil {
		return acc, err
	}
	q := url.Values{"file": {sentName(file)}}
	if format != "" {
		q.Set("format", format)
	}
	post := func(up ingest.Uploads) error {
		h, err := json.Marshal(up)
		if err != nil {
			return err
		}
		req, err := c.request(ctx, http.MethodPost, "/v1/jobs?"+q.Encode(), bytes.NewReader(data), contentTypeOf(file))
		if err != nil {
			return err
		}
		req.Header.Set(ingest.HeaderUploads, string(h))
		req.Header.Set(ingest.HeaderIdempotencyKey, key)
		return c.exchange(req, &acc)
	}
	// The server parses the description and says which local inputs it names; they are
	// uploaded, and the description goes again with the objects they became.
	err = post(ingest.Uploads{})
	var need *httpapi.Error
	if errors.As(err, &need) && need.Code == codeUploadsRequired {
		var objects ingest.Uploads
		if err = namedIn(data, need.Details); err == nil {
			if objects, err = uploadInputs(ctx, e, c, filepath.Dir(file), need.Details); err == nil {
				err = post(objects)
			}
		}
	}
	if err != nil {
		return acc, fmt.Errorf("%s: %w", shown(file), err)
	}
	return acc, nil
}

// codeUploadsRequired is the server's answer to a description naming local inputs not
// yet uploaded; its details are their names.
const codeUploadsRequired = "uploads_required"

// summarise says how many of several files were accepted, and which were refused.
func summarise(e *env, files []string, all []accepted, refused []error) {
	jobs := 0
	var names []string
	for _, a := range all {
		jobs += len(a.Jobs)
		if a.Error != nil {
			names = append(names, fmt.Sprintf("%s (%v)", a.File, a.Error["code"]))
		}
	}
	fmt.Fprintf(e.stderr, "submitted %d of %d files (%d jobs)", len(files)-len(refused), len(files), jobs)
	if len(names) > 0 {
		fmt.Fprintf(e.stderr, "; refused: %s", strings.Join(names, ", "))
	}
	fmt.Fprintln(e.stderr)
}

// waitAll follows every job to its end and prints "ID STATE" (with the exit code and
// the reason when it did not succeed), or JSON views; follow prints each event as it
// comes.
//
// Without follow, the jobs of a group are waited for through their parent record, which
// ends only once every child has ended for good: one event stream for the group, where
// one for each child cost the server a consumer each that scans the log for its job's
// events (a 10,000-task topology took 112 s and 168 CPU-s of the gateway with a stream a
// child, against 38 s and 40 CPU-s for the run alone). The children's ends are then read
// once each; a child that has not ended for good by then (one a session update took out
// of its group) is followed on its own.
//
// With follow, a submission of a group or of more than followAtOnce jobs is followed on
// feed, one stream of the whole log opened before the submission was sent, in log order;
// the jobs it did not see end (its stream broke before its first event) are followed on
// their own, and no event is printed twice.
func waitAll(ctx context.Context, e *env, c *client, f *clientFlags, ids, parents []string, inGroup map[string]bool, follow bool, feed *logFeed) error {
	clk := newClock(f.utc)
	var mu sync.Mutex
	shown := map[string]uint64{} // the last event printed of each job: a job followed again prints none twice
	show := func(ev events.Event) {
		if !follow || f.json {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if ev.Seq != 0 && ev.Seq <= shown[ev.JobID] {
			return
		}
		shown[ev.JobID] = ev.Seq
		fmt.Fprintf(e.stdout, "%s %s %s%s\n", clk.stamp(ev.Time), ev.JobID, ev.Name, eventNote(ev))
	}
	untilEnd := func(ctx context.Context, id string) error {
		err := c.stream(ctx, url.Values{"job": {id}}, func(ev events.Event) bool {
			show(ev)
			return !endsForGood(ctx, c, ev)
		})
		if err != nil {
			return fmt.Errorf("following %s: %w", id, err)
		}
		return nil
	}
	first := ids
	if follow { // a group's own events (its moves, its verdict) are the submission's too
		first = slices.Concat(ids, parents)
	}
	if feed != nil {
		rest, err := followOnFeed(ctx, feed, first, show)
		feed.stop()
		if err != nil {
			return err
		}
		first = rest
	} else if !follow && len(parents) > 0 {
		first = parents
		for _, id := range ids {
			if !inGroup[id] {
				first = append(first, id)
			}
		}
	}
	if err := forEach(ctx, first, untilEnd); err != nil {
		return err
	}
	ends := make([]jobView, len(ids))
	read := func(ctx context.Context, i int) error {
		v, err := c.job(ctx, ids[i])
		ends[i] = v
		return err
	}
	if err := forEach(ctx, indexes(len(ids)), read); err != nil {
		return err
	}
	var open []int
	for i, v := range ends {
		if !events.Status(v.Status).Terminal() || v.Restarting {
			open = append(open, i)
		}
	}
	if err := forEach(ctx, open, func(ctx context.Context, i int) error {
		if err := untilEnd(ctx, ids[i]); err != nil {
			return err
		}
		return read(ctx, i)
	}); err != nil {
		return err
	}
	failed := 0
	for _, v := range ends {
		if v.Status != string(events.StatusSucceeded) {
			failed++
		}
		if !f.json {
			fmt.Fprintln(e.stdout, outcome(v))
			if v.Status == string(events.StatusFailed) {
				if tail := c.stderrTail(ctx, v.ID, 5); tail != "" {
					fmt.Fprintf(e.stdout, "  stderr: %s\n", strings.ReplaceAll(tail, "\n", "\n  stderr: "))
				}
			}
		}
	}
	if f.json {
		if err := json.NewEncoder(e.stdout).Encode(ends); err != nil {
			return err
		}
	} else if err := printGroupEnds(ctx, e, c, parents, untilEnd); err != nil {
		return err
	}
	if failed > 0 {
		return exitCode(exitFailed)
	}
	return nil
}

// printGroupEnds prints each group's verdict after its children's ends, with its counts:
// "ID FAILED: 1 of 3 children failed; first: ... (3 children: 1 FAILED, 2 SUCCEEDED)". A
// group ends only after its last child, and its verdict is written a moment later, so one
// not ended yet is followed to its end first.
func printGroupEnds(ctx context.Context, e *env, c *client, parents []string, untilEnd func(context.Context, string) error) error {
	for _, id := range parents {
		v, err := c.job(ctx, id)
		if err == nil && !events.Status(v.Status).Terminal() {
			if err = untilEnd(ctx, id); err == nil {
				v, err = c.job(ctx, id)
			}
		}
		if err != nil {
			return err
		}
		line := outcome(v)
		if v.Group != nil {
			line += " (" + v.Group.String() + ")"
		}
		fmt.Fprintln(e.stdout, line)
	}
	return nil
}

// followAtOnce is how many jobs forEach follows at once; a --follow submission of more
// (or of a group) is followed on one stream of the whole log (logFeed).
const followAtOnce = 64

// followOnFeed shows the events of the jobs ids as the feed carries them, in log order,
// until each has had a terminal event. It returns the jobs the feed did not see end,
// when its stream broke (the caller follows those on their own). A job that restarts
// after a terminal event is left to the caller too, which reads every job's end after.
func followOnFeed(ctx context.Context, feed *logFeed, ids []string, show func(events.Event)) ([]string, error) {
	pending := make(map[string]bool, len(ids))
	for _, id := range ids {
		pending[id] = true
	}
	for len(pending) > 0 {
		ev, err := feed.next(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			rest := make([]string, 0, len(pending))
			for _, id := range ids {
				if pending[id] {
					rest = append(rest, id)
				}
			}
			return rest, nil
		}
		if !pending[ev.JobID] {
			continue
		}
		show(ev)
		if ev.Name.Terminal() {
			delete(pending, ev.JobID)
		}
	}
	return nil, nil
}

// forEach runs fn on every item, followAtOnce at a time, and returns the first error.
func forEach[T any](ctx context.Context, items []T, fn func(context.Context, T) error) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(followAtOnce)
	for _, it := range items {
		g.Go(func() error { return fn(gctx, it) })
	}
	return g.Wait()
}

// indexes is 0, 1, ..., n-1.
func indexes(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// endsForGood reports whether ev ends its job: a terminal event that no restart follows
// (a crashed attempt with restarts left is followed by the next). Only a restart moves
// a job on from a terminal event, so a job that has moved on is not done either.
func endsForGood(ctx context.Context, c *client, ev events.Event) bool {
	if !ev.Name.Terminal() {
		return false
	}
	v, err := c.job(ctx, ev.JobID)
	return err != nil || v.Seq == ev.Seq && !v.Restarting
}

// outcome is a job's end in one line: "ID SUCCEEDED", or "ID FAILED exit 127: reason".
func outcome(v jobView) string {
	s := v.ID + " " + v.Status
	if v.Status == string(events.StatusSucceeded) {
		return s
	}
	if v.ExitCode != nil {
		s += fmt.Sprintf(" exit %d", *v.ExitCode)
	}
	if v.Reason != "" && (v.ExitCode == nil || v.Reason != fmt.Sprintf("exit code %d", *v.ExitCode)) {
		s += ": " + v.Reason
	}
	return s
}

// eventNote is what an event says in a few words, for one line of --follow, watch and
// history: its reason or error, the state it moved to, its exit code, where it ran, a
// transfer's attempt. Empty for an event that says nothing more than its name. Each
// event's payload is read as its own type (events' payloads), the rest for a reason.
func eventNote(ev events.Event) string {
	on := func(s, host string) string {
		if host != "" {
			return s + " on " + host
		}
		return s
	}
	switch ev.Name {
	case events.Transfer:
		var d events.TransferData
		if ev.Payload(&d) != nil {
			return ""
		}
		s := fmt.Sprintf(": attempt %d of %d: %s -> %s", d.Attempt, d.Of, d.From, d.To)
		if d.Error != "" {
			return s + " failed: " + oneLine(d.Error)
		}
		return s + fmt.Sprintf(" (%d bytes)", d.Bytes)
	case events.DirectoryDeleted:
		var d events.DirectoryDeletedData
		if ev.Payload(&d) != nil {
			return ""
		}
		if d.OK {
			return on(": removed "+strings.Join(d.Paths, ", "), d.Host)
		}
		return on(": could not remove "+strings.Join(d.Paths, ", "), d.Host) + ": " + oneLine(d.Reason)
	case events.Restarted:
		var d events.RestartedData
		if ev.Payload(&d) != nil {
			return ""
		}
		return fmt.Sprintf(": attempt %d of %d; the last one ended: %s", d.Attempt, d.Of, oneLine(d.Reason))
	case events.StatusChanged:
		var d events.StatusData
		if ev.Payload(&d) != nil || d.State == "" {
			return ""
		}
		if d.NativeState != "" && d.NativeState != string(d.State) {
			return ": " + string(d.State) + " (" + d.NativeState + ")"
		}
		return ": " + string(d.State)
	case events.Exited:
		var d events.ExitedData
		if ev.Payload(&d) != nil {
			return ""
		}
		if d.Reason != "" {
			return ": " + oneLine(d.Reason)
		}
		return fmt.Sprintf(": exit code %d", d.ExitCode)
	case events.Incarnated:
		var d events.IncarnatedData
		if ev.Payload(&d) != nil || d.Cluster == "" {
			return ""
		}
		return on(": for cluster "+d.Cluster, d.Host)
	case events.Started:
		var d events.StartedData
		if ev.Payload(&d) != nil || d.NativeID == "" {
			return ""
		}
		return on(": native id "+d.NativeID, d.Host)
	case events.PropertySet:
		var d events.PropertySetData
		if ev.Payload(&d) != nil {
			return ""
		}
		return fmt.Sprintf(": %s = %q by %s", d.Key, cut(d.Value, 60), firstOf(d.TaskPath, "a task"))
	case events.SessionUpdated:
		var d events.SessionUpdateData
		if ev.Payload(&d) != nil {
			return ""
		}
		return fmt.Sprintf(": %d added, %d removed", len(d.Added), len(d.Removed))
	}
	var n struct {
		Reason string `json:"reason"`
		Error  string `json:"error"`
	}
	if ev.Payload(&n) != nil || firstOf(n.Reason, n.Error) == "" {
		return ""
	}
	return ": " + oneLine(firstOf(n.Reason, n.Error))
}

// oneLine puts text on one line, each run of white space (newlines too) one space.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// namedIn checks that every name the server asks to upload is written in the description
// (as it is, or escaped as JSON or XML would escape it), so a server cannot make the
// client send a file its description does not name.
func namedIn(doc []byte, names []string) error {
	for _, name := range names {
		js, _ := json.Marshal(name)
		var xs bytes.Buffer
		_ = xml.EscapeText(&xs, []byte(name))
		if name == "" || !bytes.Contains(doc, []byte(name)) && !bytes.Contains(doc, js[1:len(js)-1]) && !bytes.Contains(doc, xs.Bytes()) {
			return fmt.Errorf("the server asks for an upload of %q, which the description does not name; nothing was uploaded", name)
		}
	}
	return nil
}

// uploadInputs uploads the local inputs the server named (relative to the description's
// directory dir) with a progress bar each, and returns the objects they became.
func uploadInputs(ctx context.Context, e *env, c *client, dir string, names []string) (ingest.Uploads, error) {
	put := func(ctx context.Context, name string, r io.Reader) error {
		return c.do(ctx, http.MethodPut, "/v1/uploads/"+escapeSegments(name), r, "application/octet-stream", nil)
	}
	tty := isTerminal(e.stderr)
	opt := stager.UploadOptions{Dir: dir, Getenv: os.LookupEnv, Wrap: func(name string, size int64, r io.Reader) io.Reader {
		if !tty { // a log or a pipe gets one line a file, not a bar redrawn with \r
			fmt.Fprintf(e.stderr, "uploading %s (%d bytes)\n", filepath.Base(name), size)
			return r
		}
		bar := progressbar.NewOptions64(size, progressbar.OptionSetWriter(e.stderr), progressbar.OptionShowBytes(true),
			progressbar.OptionSetDescription("uploading "+filepath.Base(name)), progressbar.OptionOnCompletion(func() {
				fmt.Fprintln(e.stderr)
			}))
		pr := progressbar.NewReader(r, bar)
		return &pr
	}}
	objects, _, err := stager.Upload(ctx, put, names, opt)
	return objects, err
}

// isTerminal reports whether w is a terminal (a progress bar is drawn only there).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

func escapeSegments(name string) string {
	segs := strings.Split(name, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return strings.Join(segs, "/")
}

func contentTypeOf(file string) string {
	switch filepath.Ext(file) {
	case ".json":
		return "application/json"
	case ".yaml", ".yml":
		return "application/yaml"
	case ".xml":
		return "application/xml"
	}
	return ""
}

// fileKey is the idempotency key of the i-th file: the given key (KEY, KEY:2, KEY:3 ...)
// or, without one, a fresh key made for this file now.
func fileKey(key string, i int) string {
	switch {
	case key == "":
		return "gridwire-submit:" + events.NewID()
	case i == 0:
		return key
	}
	return fmt.Sprintf("%s:%d", key, i+1)
}
