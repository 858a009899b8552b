package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/pkg/cluster"
	"github.com/gridwire/gridwire/pkg/taskcred"
	"github.com/gridwire/gridwire/services/ingest"
	"github.com/gridwire/gridwire/services/watcher"
)

// scenarios are the recorded histories, in the order the fixture README lists them.
var scenarios = []scenario{
	{"success-echo", "a v3 JSON job that prints a line and succeeds", func(r *recorder) {
		id := r.open().v3(map[string]any{"executable": "/bin/echo", "arguments": []string{"hello,", "world"}})
		r.expect(id, events.StatusSucceeded, exitedWith(0))
	}},
	{"exit-3", "a job whose program exits 3: FAILED with exit code 3 after its stage-out", func(r *recorder) {
		id := r.open().v3(map[string]any{"executable": "/bin/sh", "arguments": []string{"-c", "exit 3"}})
		r.expect(id, events.StatusFailed, exitedWith(3))
	}},
	{"killed-by-signal", "a program that kills itself with SIGKILL: FAILED with 137", func(r *recorder) {
		id := r.open().v3(map[string]any{"executable": "/bin/sh", "arguments": []string{"-c", "kill -KILL $$"}})
		r.expect(id, events.StatusFailed, exitedWith(137))
	}},
	{"no-such-program", "an executable that does not exist on the target: FAILED with 127", func(r *recorder) {
		id := r.open().v3(map[string]any{"executable": "/nonexistent/program"})
		r.expect(id, events.StatusFailed, exitedWith(127))
	}},
	{"v3-yaml-substitution", "a v3 YAML job with environment and {taskid}/{lrms} substitution", func(r *recorder) {
		id := r.open().submit("job.yaml", "version: 3\nexecutable: /bin/sh\narguments: [\"-c\", \"echo $GREETING {taskid} {lrms}\"]\nenvironment: {greeting: hi}\n")[0]
		r.expect(id, events.StatusSucceeded, exitedWith(0))
	}},
	{"hostile-arguments", "arguments and environment holding shell syntax reach the program literally", func(r *recorder) {
		id := r.open().v3(map[string]any{"executable": "/bin/sh",
			"arguments":   []string{"-c", `printf '[%s]' "$@" "$X"`, "sh", "$(touch canary)", "`id`", "'; exit 9; '", "a b"},
			"environment": map[string]string{"x": "$(touch canary)"}})
		r.expect(id, events.StatusSucceeded, exitedWith(0))
		if _, err := os.Stat(filepath.Join(r.workDir(id), "canary")); err == nil {
			r.t.Fatal("a hostile value ran")
		}
	}},
	{"cancel-before-incarnation", "cancelled while still SUBMITTED: the incarnator ends it instead of rendering it", func(r *recorder) {
		id := r.open("incarnator").v3(map[string]any{"executable": "/bin/true"})
		r.request(id, events.CancelRequested)
		r.start("incarnator")
		r.expect(id, events.StatusCancelled, neverStarted, reasonHas("before incarnation"))
	}},
	{"cancel-before-start", "cancelled while QUEUED with no executor up: it never starts", func(r *recorder) {
		id := r.open("executor").v3(map[string]any{"executable": "/bin/true"})
		r.status(id, events.StatusQueued)
		r.request(id, events.CancelRequested)
		r.start("executor")
		r.expect(id, events.StatusCancelled, neverStarted, reasonHas("before it started"))
	}},
	{"cancel-running", "cancelled while RUNNING: ABORT stops the process", func(r *recorder) {
		id := r.open().submitGated()
		r.status(id, events.StatusRunning)
		r.request(id, events.CancelRequested)
		r.expect(id, events.StatusCancelled)
	}},
	{"hold-resume-success", "held and resumed while running, then succeeds", func(r *recorder) {
		id := r.open().submitGated()
		r.status(id, events.StatusRunning)
		r.request(id, events.HoldRequested)
		r.status(id, events.StatusHeld)
		r.request(id, events.ResumeRequested)
		r.status(id, events.StatusRunning)
		r.release(id, "0")
		r.expect(id, events.StatusSucceeded)
	}},
	{"hold-then-cancel", "held, then cancelled while HELD", func(r *recorder) {
		id := r.open().submitGated()
		r.status(id, events.StatusRunning)
		r.request(id, events.HoldRequested)
		r.status(id, events.StatusHeld)
		r.request(id, events.CancelRequested)
		r.expect(id, events.StatusCancelled)
	}},
	{"held-outside-gridwire", "on a cluster watched through its profile's GET_JOB_STATUS, the process is stopped and continued behind gridwire's back: status_changed both ways", func(r *recorder) {
		cfg := profileConfig(r, "forkps", "")
		cfg.Clusters[0].LRMS = "ps" // not "Fork": the watcher asks GET_JOB_STATUS rather than looking at the process
		id := r.openWith(cfg).submitGated()
		st := r.status(id, events.StatusRunning)
		r.signal(st.NativeID, syscall.SIGSTOP)
		r.status(id, events.StatusHeld)
		r.signal(st.NativeID, syscall.SIGCONT)
		r.status(id, events.StatusRunning)
		r.release(id, "0")
		r.expect(id, events.StatusSucceeded)
		r.has(id, events.StatusChanged, 3) // QUEUED (a batch START) → RUNNING, → HELD, → RUNNING
	}},
	{"action-failed-hold", "a HOLD the target refuses is recorded as action_failed; the job runs on and is cancelled", func(r *recorder) {
		id := r.openWith(profileConfig(r, "stubborn", `<idb:Template name="HOLD"><idb:Invocation name=""><idb:Body><![CDATA[echo "hold refused by site policy" >&2; exit 1]]></idb:Body></idb:Invocation></idb:Template>`)).submitGated()
		r.status(id, events.StatusRunning)
		r.request(id, events.HoldRequested)
		r.waitFor(id, "the hold's result", func(s events.State) bool { return !s.HoldRequested })
		r.has(id, events.ActionFailed, 1)
		r.request(id, events.CancelRequested)
		r.expect(id, events.StatusCancelled)
	}},
	{"start-exhausted", "a START that always fails: FAILED from QUEUED after the executor's attempts", func(r *recorder) {
		cfg := profileConfig(r, "nostart", `<idb:Template name="START"><idb:Invocation name=""><idb:Body><![CDATA[echo "no slots on this host" >&2; exit 1]]></idb:Body></idb:Invocation><idb:Field name="NATIVE_ID_PATTERN" isSettable="false"><idb:Value>^\s*([0-9]+)\s*$</idb:Value></idb:Field></idb:Template>`)
		cfg.Clusters[0].LRMS = "ps" // not "Fork": the executor runs the profile's START
		id := r.openWith(cfg).v3(map[string]any{"executable": "/bin/true"})
		r.expect(id, events.StatusFailed, neverStarted, reasonHas("attempts"))
	}},
	{"no-matching-cluster", "requirements no cluster meets: FAILED at incarnation, nothing rendered", func(r *recorder) {
		id := r.open().v3(map[string]any{"executable": "/bin/true", "requirements": map[string]any{"hostname": []string{"nowhere.example.org"}}})
		r.expect(id, events.StatusFailed, neverStarted)
	}},
	{"canonical-requirements", "requirements in the gateway's terms (the second shape of submitted): a v3 job with fork: true runs, one asking for a host no cluster has fails naming its field, a DDS task whose wnname names the cluster runs", func(r *recorder) {
		r.open()
		runs := r.v3(map[string]any{"executable": "/bin/true", "requirements": map[string]any{"fork": true, "queue": nil}})
		refused := r.v3(map[string]any{"executable": "/bin/true", "requirements": map[string]any{"hostname": []string{"nowhere.example.org"}}})
		dds := r.submit("wn.xml", `<topology name="wn"><declrequirement name="here" type="wnname" value="loc.l"/>
<decltask name="t"><exe>/bin/true</exe><requirements><name>here</name></requirements></decltask><main name="main"><task>t</task></main></topology>`)
		r.expect(runs, events.StatusSucceeded, exitedWith(0))
		r.expect(refused, events.StatusFailed, neverStarted, reasonHas("requirements.hostname (line 1): none of nowhere.example.org"))
		r.expect(dds[1], events.StatusSucceeded, exitedWith(0))
	}},
	{"failed-incarnation", "a job the renderer rejects (an executable starting with '-'): FAILED at incarnation", func(r *recorder) {
		id := r.open().v3(map[string]any{"executable": "-rf"})
		r.expect(id, events.StatusFailed, neverStarted, reasonHas("executable"))
	}},
	{"stage-in-file", "stage-in of a local file:// input, read by the program", func(r *recorder) {
		root := r.t.TempDir()
		src := r.writeFile(root, "in.txt", "staged in\n")
		id := r.openStaging(root).v3(map[string]any{"executable": "/bin/cat", "arguments": []string{"in.txt"},
			"input_files": map[string]string{"in.txt": "file://" + src}})
		r.expect(id, events.StatusSucceeded, exitedWith(0))
	}},
	{"stage-in-directory", "stage-in of a whole directory (a name ending in /)", func(r *recorder) {
		dir := r.t.TempDir()
		r.writeFile(dir, "a.txt", "a\n")
		r.writeFile(dir, "sub/b.txt", "b\n")
		id := r.openStaging(dir).v3(map[string]any{"executable": "/bin/cat", "arguments": []string{"data/a.txt", "data/sub/b.txt"},
			"input_files": map[string]string{"data": "file://" + dir + "/"}})
		r.expect(id, events.StatusSucceeded, exitedWith(0))
	}},
	{"stage-in-retry", "an HTTP input that fails once (503) and then arrives: two transfer attempts, then success", func(r *recorder) {
		url := r.files(1, map[string]string{"/input.txt": "second time lucky\n"})
		id := r.openStaging("").v3(map[string]any{"executable": "/bin/cat", "arguments": []string{"input.txt"},
			"input_files": map[string]string{"input.txt": url + "/input.txt"}, "max_transfer_attempts": 3})
		r.expect(id, events.StatusSucceeded)
		r.has(id, events.Transfer, 2)
	}},
	{"stage-in-exhausted", "an HTTP input that keeps failing: its budget of 2 attempts (v3: one retry) is spent and the job FAILS before it runs", func(r *recorder) {
		url := r.files(100, map[string]string{"/input.txt": "never\n"})
		id := r.openStaging("").v3(map[string]any{"executable": "/bin/true",
			"input_files": map[string]string{"input.txt": url + "/input.txt"}, "max_transfer_attempts": 1})
		r.expect(id, events.StatusFailed, neverStarted)
		r.has(id, events.Transfer, 2)
	}},
	{"stage-in-not-found", "an HTTP input that is not there (404): a permanent failure, no second attempt", func(r *recorder) {
		url := r.files(0, nil)
		id := r.openStaging("").v3(map[string]any{"executable": "/bin/true",
			"input_files": map[string]string{"input.txt": url + "/missing.txt"}, "max_transfer_attempts": 3})
		r.expect(id, events.StatusFailed, neverStarted)
		r.has(id, events.Transfer, 1)
	}},
	{"cancel-while-staging-in", "cancelled while an input keeps failing: the stager ends the job between attempts, and it is never queued", func(r *recorder) {
		url := r.files(100, map[string]string{"/input.txt": "never\n"})
		id := r.openStaging("").v3(map[string]any{"executable": "/bin/true",
			"input_files": map[string]string{"input.txt": url + "/input.txt"}, "max_transfer_attempts": 6})
		r.waitFor(id, "a failed attempt", func(s events.State) bool { return len(s.Transfers) > 0 })
		r.request(id, events.CancelRequested)
		r.expect(id, events.StatusCancelled, neverStarted)
		r.has(id, events.Queued, 0)
	}},
	{"stage-out-file", "an output file copied out to a file:// destination after success", func(r *recorder) {
		dst := r.t.TempDir()
		id := r.openStaging(dst).v3(map[string]any{"executable": "/bin/sh", "arguments": []string{"-c", "echo result > out.txt"},
			"output_files": map[string]string{"out.txt": "file://" + dst + "/out.txt"}})
		r.expect(id, events.StatusSucceeded)
		if b, err := os.ReadFile(filepath.Join(dst, "out.txt")); err != nil || string(b) != "result\n" {
			r.t.Fatalf("staged out %q (%v)", b, err)
		}
	}},
	{"stage-out-missing", "the program exits 0 but never writes its output file: stage-out fails, so the job FAILS", func(r *recorder) {
		dst := r.t.TempDir()
		id := r.openStaging(dst).v3(map[string]any{"executable": "/bin/true",
			"output_files": map[string]string{"out.txt": "file://" + dst + "/out.txt"}, "max_transfer_attempts": 1})
		r.expect(id, events.StatusFailed, exitedWith(0))
	}},
	{"stage-out-after-failure", "a program that writes its output and exits 2: the output is still staged out, the job FAILS with 2", func(r *recorder) {
		dst := r.t.TempDir()
		id := r.openStaging(dst).v3(map[string]any{"executable": "/bin/sh", "arguments": []string{"-c", "echo partial > out.txt; exit 2"},
			"output_files": map[string]string{"out.txt": "file://" + dst + "/out.txt"}})
		r.expect(id, events.StatusFailed, exitedWith(2))
	}},
	{"stdout-destination", "standard output sent to a file:// destination as well as kept", func(r *recorder) {
		dst := r.t.TempDir()
		id := r.openStaging(dst).v3(map[string]any{"executable": "/bin/echo", "arguments": []string{"to stdout"},
			"stdout": "file://" + dst + "/stdout.txt"})
		r.expect(id, events.StatusSucceeded)
	}},
	{"status-unknown-known", "the target cannot be asked while the job runs (status_unknown), answers again (status_known), then the job ends", func(r *recorder) {
		id, p := r.runningBehindOutage()
		p.down.Store(false)
		r.waitFor(id, "status_known", func(s events.State) bool { return !s.StatusUnknown })
		r.release(id, "0")
		r.expect(id, events.StatusSucceeded)
	}},
	{"status-unknown-exit-during-outage", "the job ends while its target cannot be asked: the exit is recorded only once the target answers", func(r *recorder) {
		id, p := r.runningBehindOutage()
		r.release(id, "5")
		waitForFile(r, filepath.Join(r.workDir(id), events.ExitFile))
		p.down.Store(false)
		r.expect(id, events.StatusFailed, exitedWith(5))
	}},
	{"adoption-after-executor-crash", "an executor died between START and its record: the next one adopts the run, which runs once", func(r *recorder) {
		id := r.open("executor").v3(map[string]any{"executable": "/bin/sh", "arguments": []string{"-c", "echo ran >> runs"}})
		run := r.crashedStart(id)
		r.start("executor")
		st := r.expect(id, events.StatusSucceeded)
		if st.NativeID != run.NativeID {
			r.t.Fatalf("recorded native ID %s, want the crashed start's %s", st.NativeID, run.NativeID)
		}
		if b, _ := os.ReadFile(filepath.Join(r.workDir(id), "runs")); string(b) != "ran\n" {
			r.t.Fatalf("the job ran %d times", strings.Count(string(b), "ran"))
		}
	}},
	{"adoption-then-cancel", "cancelled after a crashed START: the run is adopted, then aborted, not left running", func(r *recorder) {
		id := r.open("executor").submitGated()
		run := r.crashedStart(id)
		r.request(id, events.CancelRequested)
		r.start("executor")
		st := r.expect(id, events.StatusCancelled)
		if st.NativeID != run.NativeID {
			r.t.Fatalf("recorded native ID %s, want the adopted %s", st.NativeID, run.NativeID)
		}
	}},
	{"executor-restart-while-running", "the executor stops while the job runs and the job ends meanwhile: one history, FAILED with 4", func(r *recorder) {
		id := r.open().submitGated()
		r.status(id, events.StatusRunning)
		r.stop("executor")
		r.release(id, "4")
		r.start("executor")
		r.expect(id, events.StatusFailed, exitedWith(4))
	}},
	{"watcher-restart-while-running", "the watcher stops while the job runs and it ends meanwhile: the end is found on restart", func(r *recorder) {
		id := r.open().submitGated()
		r.status(id, events.StatusRunning)
		r.stop("watcher")
		r.release(id, "0")
		r.start("watcher")
		r.expect(id, events.StatusSucceeded)
	}},
	{"nats-restart-mid-job", "the embedded NATS server restarts while the job runs", func(r *recorder) {
		id := r.open().submitGated()
		r.status(id, events.StatusRunning)
		r.restartServer()
		r.release(id, "0")
		r.expect(id, events.StatusSucceeded)
	}},
	{"external-events", "another system publishes the life of a job it ran itself (POST /v1/events) to a gateway that only records and watches; gridwire's watcher decides its end", func(r *recorder) {
		r.open("incarnator", "stager", "executor")
		api := r.api("ingest")
		job := events.NewID()
		src := "urn:site:a/slurm"
		at := time.Now().UTC().Truncate(time.Millisecond)
		steps := []struct {
			name events.Name
			data any
		}{
			{events.Submitted, events.Job{ID: job, Name: "site job 4711", Executable: "/opt/site/sim", Submitter: "site-a"}},
			{events.Incarnated, events.IncarnatedData{Cluster: "site-a", Profile: "slurm", WorkDir: "/scratch/4711"}},
			{events.Queued, events.QueuedData{Cluster: "site-a"}},
			{events.Started, events.StartedData{Cluster: "site-a", NativeID: "4711", NativeState: "PENDING"}},
			{events.StatusChanged, events.StatusData{State: events.StatusRunning, NativeState: "RUNNING"}},
			{events.Exited, events.ExitedData{ExitCode: 0, NativeState: "COMPLETED"}},
			{events.StagedOut, events.StagedOutData{OK: true, Files: 1}},
		}
		for i, s := range steps {
			r.publish(api, events.NewID(), job, src, s.name, at.Add(time.Duration(i)*time.Second), s.data)
		}
		r.expect(job, events.StatusSucceeded, exitedWith(0))
	}},
	{"external-failure", "another system reports a job of its own that it lost contact with and that then exited 1; the watcher ends it FAILED", func(r *recorder) {
		r.open("incarnator", "stager", "executor")
		api := r.api("ingest")
		job := events.NewID()
		src := "urn:site:b/pbs"
		at := time.Now().UTC().Truncate(time.Millisecond)
		steps := []struct {
			name events.Name
			data any
		}{
			{events.Submitted, events.Job{ID: job, Name: "pbs 99", Executable: "/opt/site/solve"}},
			{events.Incarnated, events.IncarnatedData{Cluster: "site-b", Profile: "pbs", WorkDir: "/scratch/99"}},
			{events.Queued, events.QueuedData{Cluster: "site-b"}},
			{events.Started, events.StartedData{Cluster: "site-b", NativeID: "99.pbs", Running: true}},
			{events.StatusUnknown, events.Note{Reason: "qstat timed out"}},
			{events.StatusKnown, events.Note{}},
			{events.Exited, events.ExitedData{ExitCode: 1, NativeState: "F"}},
			{events.StagedOut, events.StagedOutData{OK: true}},
		}
		for i, s := range steps {
			r.publish(api, events.NewID(), job, src, s.name, at.Add(time.Duration(i)*time.Second), s.data)
		}
		r.expect(job, events.StatusFailed, exitedWith(1))
	}},
	{"dds-topology", "a DDS topology: its parent record and five task instances (a task and a group of 2 collections of 2), all run", func(r *recorder) {
		ids := r.open().submit("topology.xml", ddsTopology)
		if len(ids) != 6 {
			r.t.Fatalf("%d jobs, want the parent and 5 tasks", len(ids))
		}
		for _, id := range ids[1:] {
			r.expect(id, events.StatusSucceeded)
		}
		r.expect(ids[0], events.StatusSucceeded)
	}},
	{"dds-properties", "a DDS session whose writer task sets a property through the task-side API while its reader runs; both then end", func(r *recorder) {
		ids := r.open().submit("props.xml", ddsProperties)
		if len(ids) != 3 {
			r.t.Fatalf("%d jobs, want the parent and 2 tasks", len(ids))
		}
		writer, reader := ids[1], ids[2]
		r.status(writer, events.StatusRunning)
		r.status(reader, events.StatusRunning)
		api := r.api("readside")
		key, err := taskcred.Open(context.Background(), r.client.JS, 1)
		if err != nil {
			r.t.Fatal(err)
		}
		if code, body := request(r.t, http.MethodPut, api+"/v1/tasks/self/properties/peer", key.Issue(writer),
			strings.NewReader("10.0.0.7:5555")); code != http.StatusOK {
			r.t.Fatalf("PUT peer: %d %s", code, body)
		}
		if code, body := request(r.t, http.MethodGet, api+"/v1/tasks/self/properties/peer", key.Issue(reader), nil); code != http.StatusOK ||
			!strings.Contains(body, "10.0.0.7:5555") {
			r.t.Fatalf("GET peer: %d %s", code, body)
		}
		r.release(writer, "0")
		r.release(reader, "0")
		r.expect(writer, events.StatusSucceeded)
		r.expect(reader, events.StatusSucceeded)
		r.expect(ids[0], events.StatusSucceeded)
		r.has(ids[0], events.PropertySet, 1)
	}},
	{"dds-restart", "a DDS task with TaskCrashed → RestartTask 1 that crashes twice: two attempts, each from incarnation to its own FAILED, a restarted event between them; its session FAILED", func(r *recorder) {
		ids := r.open().submit("topology.xml", `<topology name="crashy">
  <decltrigger name="again" condition="TaskCrashed" action="RestartTask" arg="1"/>
  <decltask name="crash"><exe>/bin/sh -c 'exit 3'</exe><triggers><name>again</name></triggers></decltask>
  <main name="main"><task>crash</task></main>
</topology>`)
		r.waitFor(ids[1], "its last attempt", func(st events.State) bool { return st.Status.Terminal() && !st.Restartable() })
		r.expect(ids[1], events.StatusFailed, exitedWith(3), func(st events.State) string {
			if st.Attempt() != 2 {
				return fmt.Sprintf("ended at attempt %d, want 2", st.Attempt())
			}
			return ""
		})
		r.expect(ids[0], events.StatusFailed)
	}},
	{"dds-update", "a running DDS session updated to a topology that drops one task and adds another: the dropped one CANCELLED, the added one run, the kept one untouched; the session SUCCEEDED over the tasks it has", func(r *recorder) {
		ids := r.open().submit("topology.xml", updateTopology(1, "b"))
		r.status(ids[1], events.StatusRunning)
		r.status(ids[2], events.StatusRunning)
		up, err := r.harness.submit.UpdateSession(context.Background(), ids[0], ingest.Submission{File: "v2.xml",
			Data: []byte(updateTopology(1, "c")), Submitter: "recorder"})
		if err != nil || len(up.Added) != 1 || len(up.Removed) != 1 {
			r.t.Fatalf("update %+v: %v", up, err)
		}
		r.expect(ids[2], events.StatusCancelled)
		r.status(up.Added[0], events.StatusRunning)
		r.release(ids[1], "0")
		r.release(up.Added[0], "0")
		r.expect(ids[1], events.StatusSucceeded)
		r.expect(up.Added[0], events.StatusSucceeded)
		r.expect(ids[0], events.StatusSucceeded)
	}},
	{"jrdl-multi-job", "a JRDL document of two jobs: its parent record and both jobs, one succeeding, one failing", func(r *recorder) {
		ids := r.open().submit("jobs.jrdl", jrdlTwoJobs)
		if len(ids) != 3 {
			r.t.Fatalf("%d jobs, want the parent and 2", len(ids))
		}
		r.expect(ids[1], events.StatusSucceeded)
		r.expect(ids[2], events.StatusFailed, exitedWith(1))
		r.expect(ids[0], events.StatusFailed)
	}},
	{"group-cancel", "a JRDL document of two running jobs, cancelled on its parent record: both children and the parent CANCELLED", func(r *recorder) {
		ids := r.open().submit("jobs.jrdl", jrdlTwoSleepers)
		r.status(ids[1], events.StatusRunning)
		r.status(ids[2], events.StatusRunning)
		r.status(ids[0], events.StatusRunning)
		r.request(ids[0], events.CancelRequested)
		r.expect(ids[1], events.StatusCancelled)
		r.expect(ids[2], events.StatusCancelled)
		r.expect(ids[0], events.StatusCancelled)
	}},
	{"coallocated-subjob-fails", "a JRDL job of two co-allocated subjobs started together; one exits 1, the other is ended, the parent FAILED", func(r *recorder) {
		ids := r.open().submit("subjobs.jrdl", jrdlCoallocated)
		r.expect(ids[2], events.StatusFailed, exitedWith(1))
		r.expect(ids[1], events.StatusCancelled)
		r.expect(ids[0], events.StatusFailed)
	}},
	{"many-jobs-mixed", "four jobs at once, interleaved in one stream: success, exit 3, cancelled, held and resumed", func(r *recorder) {
		r.open()
		ok := r.v3(map[string]any{"executable": "/bin/true"})
		bad := r.v3(map[string]any{"executable": "/bin/sh", "arguments": []string{"-c", "exit 3"}})
		cancel := r.submitGated()
		held := r.submitGated()
		r.status(cancel, events.StatusRunning)
		r.status(held, events.StatusRunning)
		r.request(cancel, events.CancelRequested)
		r.request(held, events.HoldRequested)
		r.status(held, events.StatusHeld)
		r.request(held, events.ResumeRequested)
		r.status(held, events.StatusRunning)
		r.release(held, "0")
		r.expect(ok, events.StatusSucceeded)
		r.expect(bad, events.StatusFailed, exitedWith(3))
		r.expect(cancel, events.StatusCancelled)
		r.expect(held, events.StatusSucceeded)
	}},
	{"directory-deleted", "a cluster with retention 0: the job succeeds, then the executor runs the profile's DELETE on its working directory and records directory_deleted after the terminal event", func(r *recorder) {
		cfg := cluster.Default()
		cfg.Clusters[0].Retention = &cluster.Retention{}
		id := r.openWith(cfg).v3(map[string]any{"executable": "/bin/true"})
		r.expect(id, events.StatusSucceeded, exitedWith(0))
		r.waitFor(id, "directory_deleted", func(s events.State) bool { return s.DirectoryDeleted != nil })
		if _, err := os.Stat(r.workDir(id)); !os.IsNotExist(err) {
			r.t.Fatalf("the working directory is still there: %v", err)
		}
	}},
}

// openStaging opens the harness with a stager that may read and write gateway files
// under root (none when root is "") and reach HTTP storage on the loopback address,
// where the recorder serves its files: both are closed by default.
func (r *recorder) openStaging(root string) *recorder {
	r.t.Helper()
	roots := "[]"
	if root != "" {
		roots = fmt.Sprintf("[{path: %q, access: read-write}]", root)
	}
	cfg, err := cluster.Parse("recorder.yaml", []byte(fmt.Sprintf(`clusters:
  - {name: local, kind: fork, profile: fork, lrms: Fork}
stager:
  file_roots: %s
  http:
    allow: ["127.0.0.1"]
`, roots)))
	if err != nil {
		r.t.Fatal(err)
	}
	return r.openWith(cfg)
}

// submitGated submits a job that runs until the recorder writes its exit code.
func (r *recorder) submitGated() string { return r.v3(gated()) }

// signal sends a signal to a fork job's process group.
func (r *recorder) signal(pid string, sig syscall.Signal) {
	r.t.Helper()
	var n int
	if _, err := fmt.Sscan(pid, &n); err != nil {
		r.t.Fatal(err)
	}
	if err := syscall.Kill(-n, sig); err != nil {
		r.t.Fatalf("kill -%d -%d: %v", sig, n, err)
	}
}

func waitForFile(r *recorder, path string) {
	r.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		if _, err := os.Stat(path); err == nil {
			return
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("%s never appeared", path)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// profileConfig is a config whose one cluster, "local", runs jobs with a profile that
// extends the shipped fork profile by the given templates: a site whose HOLD or START
// misbehaves, for histories a healthy fork target never writes.
func profileConfig(r *recorder, name, templates string) cluster.Config {
	r.t.Helper()
	dir := r.t.TempDir()
	shipped, err := filepath.Glob(filepath.Join("..", "..", "deploy", "profiles", "*.xml"))
	if err != nil || len(shipped) == 0 {
		r.t.Fatalf("shipped profiles: %v", err)
	}
	for _, p := range shipped {
		b, err := os.ReadFile(p)
		if err != nil {
			r.t.Fatal(err)
		}
		r.writeFile(dir, filepath.Base(p), string(b))
	}
	r.writeFile(dir, name+".xml", `<?xml version="1.0" encoding="UTF-8"?>
<osp:Profile xmlns:osp="http://gpe.intel.com/osprs/profile" xmlns:idb="http://gpe.intel.com/idb" name="`+name+`" extends="fork">
`+templates+`
</osp:Profile>
`)
	cl := cluster.LocalFork()
	cl.Profile = name
	return cluster.Config{ProfileDir: dir, Clusters: []cluster.Cluster{cl}}
}

const ddsTopology = `<topology name="pair">
  <var name="greeting" value="hello from task"/>
  <decltask name="hello">
    <exe reachable="true">/bin/sh -c "echo ${greeting} $DDS_TASK_INDEX"</exe>
  </decltask>
  <decltask name="count">
    <exe>/bin/echo collection %collectionIndex% task %taskIndex%</exe>
  </decltask>
  <declcollection name="both">
    <tasks><name>hello</name><name>count</name></tasks>
  </declcollection>
  <main name="main">
    <task>hello</task>
    <group name="g" n="2"><collection>both</collection></group>
  </main>
</topology>
`

// ddsProperties is a writer and a reader of one property, each running until the test
// writes its exit code into "release" (as gated does).
const ddsProperties = `<topology name="props">
  <property name="peer"/>
  <decltask name="server">
    <exe>/bin/sh -c 'while [ ! -s release ]; do sleep 0.02; done; exit "$(cat release)"'</exe>
    <properties><name access="write">peer</name></properties>
  </decltask>
  <decltask name="client">
    <exe>/bin/sh -c 'while [ ! -s release ]; do sleep 0.02; done; exit "$(cat release)"'</exe>
    <properties><name access="read">peer</name></properties>
  </decltask>
  <main name="main"><task>server</task><task>client</task></main>
</topology>
`

const jrdlTwoJobs = `<?xml version="1.0" encoding="UTF-8"?>
<jrdl>
  <substitutionDef name="GREETING"><stringElement value="hello from JRDL"/></substitutionDef>
  <job>
    <executable><path><stringElement value="/bin/echo"/></path></executable>
    <arguments><stringArray>
      <string><substitutionRef name="GREETING"/></string>
    </stringArray></arguments>
  </job>
  <job>
    <executable><path><stringElement value="/bin/false"/></path></executable>
  </job>
</jrdl>
`

const jrdlTwoSleepers = `<jrdl>
  <job><executable><path><stringElement value="/bin/sleep"/></path></executable>
    <arguments><stringArray><string><stringElement value="60"/></string></stringArray></arguments></job>
  <job><executable><path><stringElement value="/bin/sleep"/></path></executable>
    <arguments><stringArray><string><stringElement value="60"/></string></stringArray></arguments></job>
</jrdl>
`

// jrdlCoallocated is one job split into two subjobs: the first sleeps until it is ended,
// the second fails once both have started.
const jrdlCoallocated = `<jrdl>
  <job>
    <executable><path><stringElement value="/bin/sh"/></path></executable>
    <subjob>
      <arguments><stringArray><string><stringElement value="-c"/></string>
        <string><stringElement value="sleep 60"/></string></stringArray></arguments>
    </subjob>
    <subjob>
      <arguments><stringArray><string><stringElement value="-c"/></string>
        <string><stringElement value="exit 1"/></string></stringArray></arguments>
    </subjob>
  </job>
</jrdl>
`

// runningBehindOutage submits a gated job, waits for it to run, then cuts the watcher
// off from its target until status_unknown is recorded; p.down ends the outage.
func (r *recorder) runningBehindOutage() (string, *outage) {
	p := &outage{inner: watcher.ForkProber{}}
	r.open("watcher")
	r.watchThrough(p)
	id := r.submitGated()
	r.status(id, events.StatusRunning)
	p.down.Store(true)
	r.waitFor(id, "status_unknown", func(s events.State) bool { return s.StatusUnknown })
	return id, p
}
