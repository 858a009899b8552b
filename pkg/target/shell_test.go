package target

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gridwire/gridwire/pkg/cluster"
)

// shell is what both runners offer.
type shell interface {
	Host() string
	Run(ctx context.Context, script string) (Output, error)
	Feed(ctx context.Context, script string) (Output, error)
	Stream(ctx context.Context, script string, stdout func(hostKey string) io.Writer) (Output, error)
}

// Both runners report output and exit status alike, pass values through WithVars
// literally, and Feed carries a script past the kernel's limit on one argument.
func TestShellsRunAndFeed(t *testing.T) {
	remote := sshTarget(t)
	for name, sh := range map[string]shell{"local": Local{}, "ssh": remote} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			out, err := sh.Run(ctx, "echo out; echo err >&2; exit 3")
			if err != nil || out.ExitCode != 3 || string(out.Stdout) != "out\n" || string(out.Stderr) != "err\n" {
				t.Fatalf("Run: %+v %v", out, err)
			}
			if out.OK() || out.Describe() != "exit 3: err" {
				t.Errorf("OK %v, Describe %q", out.OK(), out.Describe())
			}
			hostile := "a'b\"c $HOME `id` \n; rm -rf /"
			out, err = sh.Run(ctx, WithVars(map[string]string{"GW_X": hostile}, `printf '%s' "$GW_X"; sh -c 'printf %s "$GW_X"'`))
			if err != nil || string(out.Stdout) != hostile+hostile {
				t.Errorf("WithVars: %q %v; want the value twice, literally (exported)", out.Stdout, err)
			}
			big := "x=" + strings.Repeat("y", 200<<10) + "\necho ${#x}\n"
			out, err = sh.Feed(ctx, big)
			if err != nil || !out.OK() || strings.TrimSpace(string(out.Stdout)) != "204800" {
				t.Errorf("Feed of a 200 KiB script: %s %v", out.Describe(), err)
			}
			if (name == "ssh") != (out.HostKey != "") {
				t.Errorf("host key %q on %s", out.HostKey, name)
			}
			if name == "ssh" && sh.Host() != remote.Addr {
				t.Errorf("host %q, want %q", sh.Host(), remote.Addr)
			}
		})
	}
}

// Stream hands the script's output over as it comes: the script's second line waits
// for a file that the writer makes only once it has the first line, which a buffered
// run would never let happen.
func TestShellsStream(t *testing.T) {
	remote := sshTarget(t)
	for name, sh := range map[string]shell{"local": Local{}, "ssh": remote} {
		t.Run(name, func(t *testing.T) {
			gate := filepath.Join(t.TempDir(), "gate")
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // only a broken Stream waits this long
			defer cancel()
			w := &gateWriter{gate: gate}
			var key string
			out, err := sh.Stream(ctx, "echo first\nuntil [ -e '"+gate+"' ]; do sleep 0.005; done\necho second; echo err >&2; exit 2\n",
				func(k string) io.Writer { key = k; return w })
			if err != nil || out.ExitCode != 2 || out.Stdout != nil || string(out.Stderr) != "err\n" || w.got.String() != "first\nsecond\n" {
				t.Fatalf("Stream: %+v %v, wrote %q", out, err, w.got.String())
			}
			if key != out.HostKey || (name == "ssh") != (key != "") {
				t.Errorf("host key %q given to stdout, %q in the output", key, out.HostKey)
			}
		})
	}
}

// gateWriter keeps what it is given and makes the gate file once a line has come.
type gateWriter struct {
	gate string
	got  bytes.Buffer
}

func (w *gateWriter) Write(p []byte) (int, error) {
	w.got.Write(p)
	if bytes.Contains(w.got.Bytes(), []byte("\n")) {
		if err := os.WriteFile(w.gate, nil, 0o644); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

// A script that cannot run at all is an error, not an Output.
func TestLocalRunEndedContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if out, err := (Local{}).Run(ctx, "true"); err == nil {
		t.Fatalf("Run with an ended context: %+v, want an error", out)
	}
}

// A cluster's login: its key file, else the agent; the known_hosts it names.
func TestClusterLogin(t *testing.T) {
	withKey := ClusterLogin(cluster.Cluster{User: "u", Identity: "/k", KnownHosts: "/kh"}).Config()
	if withKey.User != "u" || withKey.UseAgent || len(withKey.IdentityFiles) != 1 || withKey.IdentityFiles[0] != "/k" || withKey.KnownHostsFile != "/kh" {
		t.Errorf("with a key file: %+v", withKey)
	}
	agent := ClusterLogin(cluster.Cluster{User: "u"}).Config()
	if !agent.UseAgent || len(agent.IdentityFiles) != 0 {
		t.Errorf("without a key file: %+v; want the agent", agent)
	}
	if _, err := NewPool(cluster.Cluster{Name: "bad", Identity: "/nonexistent/key"}, nil); err == nil || !strings.Contains(err.Error(), "cluster bad") {
		t.Errorf("a pool with a missing key file: %v; want an error naming the cluster", err)
	}
}

// An excerpt is cut at n bytes and says so; a short output stays whole.
func TestExcerpt(t *testing.T) {
	if got := Excerpt([]byte("abcdef"), 3); got != "abc..." {
		t.Errorf("cut: %q", got)
	}
	if got := Excerpt([]byte("abc"), 3); got != "abc" {
		t.Errorf("whole: %q", got)
	}
}

// A script on this host names its account in LOGNAME even when the gateway was started
// without one (a JOB script reads it instead of forking id -un), and a LOGNAME the
// gateway has is passed on as it is; every other variable stays the caller's.
func TestLocalSetsLOGNAME(t *testing.T) {
	u, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("GW_TEST_KEPT", "kept")
	ctx := context.Background()
	script := `printf '%s %s' "$LOGNAME" "$GW_TEST_KEPT"`
	for logname, want := range map[string]string{"": u.Username + " kept", "someone-else": "someone-else kept"} {
		t.Setenv("LOGNAME", logname)
		if logname == "" {
			os.Unsetenv("LOGNAME")
		}
		run, err := Local{}.Run(ctx, script)
		if err != nil || string(run.Stdout) != want {
			t.Errorf("LOGNAME %q: Run printed %q (%v), want %q", logname, run.Stdout, err, want)
		}
		fed, err := Local{}.Feed(ctx, script)
		if err != nil || string(fed.Stdout) != want {
			t.Errorf("LOGNAME %q: Feed printed %q (%v), want %q", logname, fed.Stdout, err, want)
		}
	}
}
