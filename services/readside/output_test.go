package readside

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/pkg/cluster"
	"github.com/gridwire/gridwire/pkg/sshx/sshtest"
)

// ranOn plays a job that was started on host of cluster c, in dir, up to its start.
func ranOn(t *testing.T, st *events.Store, id, c, host, dir string) {
	t.Helper()
	play(t, st, id, t0, []step{
		{Name: events.Submitted, Route: "", Payload: events.Job{ID: id, Name: "printer", Executable: "/bin/echo"}},
		{Name: events.Incarnated, Route: "", Payload: events.IncarnatedData{Cluster: c, Profile: "fork", WorkDir: dir}},
		{Name: events.Queued, Route: c, Payload: events.QueuedData{Cluster: c}},
		{Name: events.Started, Route: c, Payload: events.StartedData{Cluster: c, Host: host, NativeID: "42", Running: true}},
	})
}

func get(t *testing.T, url string) (int, http.Header, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

// A job's output is read where it ran: on this host for a fork cluster, over SFTP from
// the job's host for an SSH (or batch) cluster; from an offset, from the end, stderr too,
// and followed while the job runs until its end.
func TestOutputFromEveryTargetKind(t *testing.T) {
	srv := sshtest.NewServer(t)
	clusters := []cluster.Cluster{cluster.LocalFork(),
		{Name: "remote", Kind: cluster.KindSSH, Hosts: []string{srv.Addr}, User: "u", Identity: srv.ClientKeyFile,
			KnownHosts: srv.KnownHostsFile, Profile: "slurm", LRMS: "Slurm"}}
	b, st := openBus(t)
	s := serve(t, b, st, Config{FlushEvery: 10 * time.Millisecond, Clusters: clusters}, nil)
	for _, c := range []struct{ cluster, host string }{{"local", "gateway"}, {"remote", srv.Addr}} {
		t.Run(c.cluster, func(t *testing.T) {
			id := events.NewID()
			dir := t.TempDir()
			os.MkdirAll(filepath.Join(dir, events.ControlDir), 0o755)
			ranOn(t, st, id, c.cluster, c.host, dir)
			base := s.URL + "/v1/jobs/" + id + "/logs"
			write := func(file, text string) {
				f, _ := os.OpenFile(filepath.Join(dir, file), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
				f.WriteString(text)
				f.Close()
			}
			write(events.StdoutFile, "one\ntwo\n")
			write(events.StderrFile, "warning\n")
			if code, h, body := get(t, base); code != 200 || body != "one\ntwo\n" || h.Get("Gridwire-Output-Offset") != "0" {
				t.Errorf("stdout: %d %q %v", code, body, h)
			}
			if code, _, body := get(t, base+"?stream=stderr"); code != 200 || body != "warning\n" {
				t.Errorf("stderr: %d %q", code, body)
			}
			if code, h, body := get(t, base+"?offset=-4"); code != 200 || body != "two\n" || h.Get("Gridwire-Output-Offset") != "4" {
				t.Errorf("the last 4 bytes: %d %q %v", code, body, h)
			}
			if code, _, body := get(t, base+"?offset=4"); code != 200 || body != "two\n" {
				t.Errorf("from 4: %d %q", code, body)
			}
			if code, _, body := get(t, base+"?stream=stdin"); code != 400 || !strings.Contains(body, "bad_stream") {
				t.Errorf("stream=stdin: %d %s", code, body)
			}

			// Followed: what is there, then what comes, until the job has ended.
			resp, err := http.Get(base + "?follow=true")
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			buf := make([]byte, 64)
			n, _ := io.ReadAtLeast(resp.Body, buf, len("one\ntwo\n"))
			if string(buf[:n]) != "one\ntwo\n" {
				t.Fatalf("followed, first: %q", buf[:n])
			}
			write(events.StdoutFile, "three\n")
			play(t, st, id, t0.Add(time.Minute), []step{
				{Name: events.Exited, Route: c.cluster, Payload: events.ExitedData{ExitCode: 0}},
				{Name: events.StagedOut, Route: "", Payload: events.StagedOutData{OK: true}},
				{Name: events.Succeeded, Route: "", Payload: events.EndData{}},
			})
			rest, err := io.ReadAll(resp.Body)
			if err != nil || string(rest) != "three\n" {
				t.Errorf("followed, the rest until the end: %q %v", rest, err)
			}

			os.RemoveAll(dir)
			if code, _, body := get(t, base); code != http.StatusGone || !strings.Contains(body, "output_gone") {
				t.Errorf("after cleanup: %d %s", code, body)
			}
			// Removed under the cluster's retention: the answer says so, and when.
			play(t, st, id, t0.Add(time.Hour), []step{{Name: events.DirectoryDeleted, Route: c.cluster,
				Payload: events.DirectoryDeletedData{OK: true, Paths: []string{dir}, Script: events.ScriptDelete, Tries: 1}}})
			if code, _, body := get(t, base); code != http.StatusGone || !strings.Contains(body, "retention removed") ||
				!strings.Contains(body, t0.Add(time.Hour).Format(time.RFC3339)) {
				t.Errorf("after the retention's removal: %d %s", code, body)
			}
		})
	}
	unknown := events.NewID()
	if code, _, body := get(t, s.URL+"/v1/jobs/"+unknown+"/logs"); code != 404 || !strings.Contains(body, "no_such_job") {
		t.Errorf("unknown job: %d %s", code, body)
	}
	// A group runs nothing itself: the answer says so and where the output is, at once,
	// followed or not.
	group, child := events.NewID(), events.NewID()
	play(t, st, group, t0, []step{{Name: events.Submitted, Payload: events.Job{ID: group, Name: "document", Kind: events.KindGroup,
		Children: []string{child}}}})
	for _, q := range []string{"", "?follow=true"} {
		if code, _, body := get(t, s.URL+"/v1/jobs/"+group+"/logs"+q); code != 404 || !strings.Contains(body, "no_output") ||
			!strings.Contains(body, "is a group (1 child) and runs nothing itself") {
			t.Errorf("a group's output%s: %d %s", q, code, body)
		}
	}
	queued := events.NewID()
	play(t, st, queued, t0, []step{{Name: events.Submitted, Route: "", Payload: events.Job{ID: queued, Executable: "/bin/true"}}})
	if code, _, body := get(t, s.URL+"/v1/jobs/"+queued+"/logs"); code != http.StatusConflict || !strings.Contains(body, "not_started") {
		t.Errorf("a job not started: %d %s", code, body)
	}
}
