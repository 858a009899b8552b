package main

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gridwire/gridwire/pkg/ptpwire"
	"github.com/gridwire/gridwire/services/readside/ptp/ptptest"
)

const ptpWait = 90 * time.Second

// TestPTPSessionsAgainstServe drives whole sessions in both wire forms against `serve
// --ptp-listen`, through the real pipeline: /bin/echo hello completes with exit code 0,
// sleep 60 is terminated, events stop, the client quits; then a client that reconnects
// with the same base ID finds the jobs under the same element IDs.
func TestPTPSessionsAgainstServe(t *testing.T) {
	ptpAddr := freeAddr(t)
	serveCLI(t, "--ptp-listen", ptpAddr)
	ids := map[string]string{}
	for i, f := range []ptpwire.Format{ptpwire.FormatBinary, ptpwire.FormatText} {
		c := dialPTP(t, ptpAddr, f)
		sub := "s" + strconv.Itoa(i)
		for k, v := range drivePTP(t, c, sub) {
			ids[k] = v
		}
		c.Close()
	}
	again := dialPTP(t, ptpAddr, ptpwire.FormatBinary)
	defer again.Close()
	if err := again.Handshake(ptpWait, 5000); err != nil {
		t.Fatal(err)
	}
	err := again.Wait(ptpWait, "every job again", func(c *ptptest.Client) bool { return len(c.Jobs) >= len(ids) })
	if err != nil {
		t.Fatal(err)
	}
	again.Snapshot(func(c *ptptest.Client) {
		for id, j := range c.Jobs {
			if want, ok := ids[j.Attrs["gridwireJobId"]]; ok && want != id {
				t.Errorf("job %s: element %s after reconnecting, was %s", j.Attrs["gridwireJobId"], id, want)
			}
		}
	})
}

// TestPTPProxyConnectsBack launches `ptp-proxy` as Eclipse PTP does: the test listens as
// Eclipse would, the proxy connects back and relays the session to serve.
func TestPTPProxyConnectsBack(t *testing.T) {
	ptpAddr := freeAddr(t)
	serveCLI(t, "--ptp-listen", ptpAddr)
	dialPTP(t, ptpAddr, ptpwire.FormatBinary).Close() // listening
	eclipse, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer eclipse.Close()
	port := eclipse.Addr().(*net.TCPAddr).Port
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	proxied := make(chan error, 1)
	go func() {
		_, _, err := runCLI(ctx, "ptp-proxy", "--proxy=tcp", "--host=127.0.0.1", "--port="+strconv.Itoa(port), "--debug=0", "--server", "tcp://"+ptpAddr)
		proxied <- err
	}()
	conn, err := eclipse.Accept()
	if err != nil {
		t.Fatal(err)
	}
	c := ptptest.New(conn, ptpwire.FormatBinary)
	defer c.Close()
	drivePTP(t, c, "via-proxy")
	endsAfterQuit(t, proxied, "ptp-proxy")
}

// TestPTPProxyOverStdio runs `ptp-proxy --proxy=stdio`, as a proxy started over an SSH
// channel is: the session comes on its standard input and goes out on its standard output.
func TestPTPProxyOverStdio(t *testing.T) {
	ptpAddr := freeAddr(t)
	serveCLI(t, "--ptp-listen", ptpAddr)
	dialPTP(t, ptpAddr, ptpwire.FormatText).Close() // listening
	toProxy, fromEclipse := io.Pipe()
	toEclipse, fromProxy := io.Pipe()
	proxied := make(chan error, 1)
	go func() {
		_, err := executeIn(context.Background(), []string{"ptp-proxy", "--proxy=stdio", "--debug=0", "--server", "tcp://" + ptpAddr},
			func(string) string { return "" }, toProxy, fromProxy, io.Discard)
		fromProxy.Close()
		proxied <- err
	}()
	c := ptptest.New(pipeConn{toEclipse, fromEclipse}, ptpwire.FormatText)
	drivePTP(t, c, "via-stdio")
	fromEclipse.Close() // Eclipse is gone
	endsAfterQuit(t, proxied, "ptp-proxy")
}

// endsAfterQuit waits for a proxy's session to end once the client has quit.
func endsAfterQuit(t *testing.T, done <-chan error, what string) {
	t.Helper()
	select {
	case err := <-done:
		if err != nil && !errors.Is(err, context.Canceled) {
			t.Fatalf("%s: %v", what, err)
		}
	case <-time.After(ptpWait):
		t.Fatalf("%s did not end after QUIT", what)
	}
}

// pipeConn is the Eclipse end of a stdio proxy: it reads the proxy's output and writes
// its input.
type pipeConn struct {
	*io.PipeReader
	*io.PipeWriter
}

func (p pipeConn) Close() error {
	p.PipeWriter.Close()
	return p.PipeReader.Close()
}

func TestPTPProxyNeedsWhereToServeFrom(t *testing.T) {
	_, _, err := runCLI(context.Background(), "ptp-proxy", "--proxy=tcp", "--host=127.0.0.1", "--port=1")
	if err == nil || !strings.Contains(err.Error(), "--server") {
		t.Fatalf("ptp-proxy without --server or --nats-url: %v", err)
	}
}

// dialPTP connects to the endpoint, which starts listening a moment after the HTTP API.
func dialPTP(t *testing.T, addr string, f ptpwire.Format) *ptptest.Client {
	t.Helper()
	deadline := time.Now().Add(ptpWait)
	for {
		c, err := ptptest.Dial(addr, f, "")
		if err == nil {
			return c
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// drivePTP runs one session and returns the element ID of each job it made, by
// gridwire job ID.
func drivePTP(t *testing.T, c *ptptest.Client, sub string) map[string]string {
	t.Helper()
	check := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	check(c.Handshake(ptpWait, 5000))
	check(c.Wait(ptpWait, "the model", func(c *ptptest.Client) bool { return len(c.Queues) >= 2 && len(c.Machines) >= 1 }))
	var queue string
	c.Snapshot(func(c *ptptest.Client) {
		for id, q := range c.Queues {
			if q["name"] == "local/default" {
				queue = id
			}
		}
	})
	if queue == "" {
		t.Fatal("no local/default queue")
	}
	_, err := c.Must(ptpWait, ptpwire.CmdSubmitJob, "jobSubId="+sub+"-echo", "execName=echo", "execPath=/bin", "progArgs=hello", "launchedByPTP=true", "queueId="+queue)
	check(err)
	check(c.Wait(ptpWait, "echo completed", func(c *ptptest.Client) bool {
		j, ok := c.Jobs[c.BySubID[sub+"-echo"]]
		return ok && j.Attrs["jobState"] == "COMPLETED"
	}))
	echo, _ := c.Job(sub + "-echo")
	if echo.Attrs["jobStatus"] != "SUCCEEDED" || echo.Attrs["jobExitCode"] != "0" || echo.Proc["processExitCode"] != "0" {
		t.Fatalf("echo: %v %v", echo.Attrs, echo.Proc)
	}
	_, err = c.Must(ptpWait, ptpwire.CmdSubmitJob, "jobSubId="+sub+"-sleep", "execName=sleep", "progArgs=60", "queueId="+queue)
	check(err)
	check(c.Wait(ptpWait, "sleep running", func(c *ptptest.Client) bool {
		j, ok := c.Jobs[c.BySubID[sub+"-sleep"]]
		return ok && j.Attrs["jobState"] == "RUNNING"
	}))
	sleep, _ := c.Job(sub + "-sleep")
	_, err = c.Must(ptpWait, ptpwire.CmdTerminateJob, "jobId="+sleep.ID)
	check(err)
	check(c.Wait(ptpWait, "sleep cancelled", func(c *ptptest.Client) bool {
		j := c.Jobs[sleep.ID]
		return j.Attrs["jobState"] == "COMPLETED" && j.Attrs["jobStatus"] == "CANCELLED"
	}))
	r, err := c.Call(ptpWait, ptpwire.CmdSubmitJob, "jobSubId="+sub+"-bad", "execPath=/bin")
	check(err)
	if r[0].ID != ptpwire.EvSubmitJobError || !strings.Contains(strings.Join(r[0].Args, " "), "execName: missing") {
		t.Fatalf("submission without execName: %v", r)
	}
	_, err = c.Must(ptpWait, ptpwire.CmdStopEvents)
	check(err)
	_, err = c.Must(ptpWait, ptpwire.CmdQuit)
	check(err)
	return map[string]string{echo.Attrs["gridwireJobId"]: echo.ID, sleep.Attrs["gridwireJobId"]: sleep.ID}
}

// TestPTPWithTokens: with tokens configured every session opens with the token line;
// a session without one is closed, a read-only token sees the model but may not submit,
// and a job submitted with a full token is recorded as that principal's.
func TestPTPWithTokens(t *testing.T) {
	const alice, reader = "alice-secret-token-1", "reader-secret-token-2"
	cfg := filepath.Join(t.TempDir(), "gridwire.yaml")
	_ = os.WriteFile(cfg, []byte(`tokens:
  - {token: `+alice+`, principal: alice, allow: [submit, read, cancel]}
  - {token: `+reader+`, principal: auditor, allow: [read]}
`), 0o600)
	ptpAddr := freeAddr(t)
	server := serveCLI(t, "--config", cfg, "--ptp-listen", ptpAddr)
	dialPTP(t, ptpAddr, ptpwire.FormatBinary).Close() // listening

	anon, err := ptptest.Dial(ptpAddr, ptpwire.FormatBinary, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := anon.Call(ptpWait, ptpwire.CmdInit, "version=2.0", "baseId=1"); err == nil {
		t.Fatal("a session without a token was served")
	}
	anon.Close()

	ro, err := ptptest.Dial(ptpAddr, ptpwire.FormatBinary, reader)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if err := ro.Handshake(ptpWait, 1); err != nil {
		t.Fatal(err)
	}
	r, err := ro.Call(ptpWait, ptpwire.CmdSubmitJob, "jobSubId=x", "execName=true")
	if err != nil || r[0].ID != ptpwire.EvSubmitJobError {
		t.Fatalf("read-only token submitted: %v %v", r, err)
	}

	rw, err := ptptest.Dial(ptpAddr, ptpwire.FormatText, alice)
	if err != nil {
		t.Fatal(err)
	}
	defer rw.Close()
	if err := rw.Handshake(ptpWait, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := rw.Must(ptpWait, ptpwire.CmdSubmitJob, "jobSubId=y", "execName=true"); err != nil {
		t.Fatal(err)
	}
	if err := rw.Wait(ptpWait, "the job", func(c *ptptest.Client) bool { return c.BySubID["y"] != "" }); err != nil {
		t.Fatal(err)
	}
	// Ingest took the submitter from the session's token, which PTP passed on.
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		code, body := request(t, "GET", server+"/v1/jobs", alice, nil)
		if code == 200 && strings.Contains(body, `"submitter": "alice"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("jobs: %d %s, want alice's job", code, body)
		}
	}
}

// TestPTPProxyServesFromNATS: with --nats-url the proxy serves the session itself,
// straight from the NATS cluster that serve runs.
func TestPTPProxyServesFromNATS(t *testing.T) {
	natsAddr := freeAddr(t)
	serveCLI(t, "--nats-listen", natsAddr, "--nats-user", "gw", "--nats-password", "s3cret")
	eclipse, proxy := net.Pipe()
	f := &ptpProxyFlags{}
	f.bus.natsURL, f.bus.data, f.bus.logLevel = "nats://"+natsAddr, t.TempDir(), "error"
	f.bus.user, f.bus.password = "gw", "s3cret"
	e := &env{getenv: func(string) string { return "" }, stdout: io.Discard, stderr: io.Discard}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	served := make(chan error, 1)
	go func() { served <- servePTPHere(ctx, e, f, proxy) }()
	c := ptptest.New(eclipse, ptpwire.FormatBinary)
	defer c.Close()
	drivePTP(t, c, "nats")
	endsAfterQuit(t, served, "ptp-proxy --nats-url")
}

func TestPTPListenRefusesOtherAddressesWithoutTokens(t *testing.T) {
	_, _, err := runCLI(context.Background(), "serve", "--data", t.TempDir(), "--http", freeAddr(t), "--ptp-listen", "0.0.0.0:0")
	if err == nil || !strings.Contains(err.Error(), "--ptp-listen") {
		t.Fatalf("serve --ptp-listen 0.0.0.0:0 without tokens: %v", err)
	}
}
