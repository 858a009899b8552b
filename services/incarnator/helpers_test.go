package incarnator

import (
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/pkg/cluster"
	"github.com/gridwire/gridwire/pkg/shellquote"
	"github.com/gridwire/gridwire/services/incarnator/profile"
)

// testSet is the built-in profiles plus extra files (name → XML).
func testSet(t testing.TB, extra map[string]string) *profile.Set {
	t.Helper()
	fsys := fstest.MapFS{}
	entries, err := fs.ReadDir(builtinProfiles, "profiles")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		data, _ := fs.ReadFile(builtinProfiles, "profiles/"+e.Name())
		fsys["p/"+e.Name()] = &fstest.MapFile{Data: data}
	}
	for name, body := range extra {
		fsys["p/"+name] = &fstest.MapFile{Data: []byte(body)}
	}
	set, err := profile.LoadFS(fsys, "p", "test")
	if err != nil {
		t.Fatal(err)
	}
	return set
}

func mustPlanner(t testing.TB, set *profile.Set, clusters ...cluster.Cluster) *ProfilePlanner {
	t.Helper()
	p, err := NewPlanner(cluster.Config{Clusters: clusters}, set, "")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func forkCluster(root string) cluster.Cluster {
	return cluster.Cluster{Name: "local", Kind: cluster.KindFork, Profile: "fork", LRMS: "Fork", WorkRoot: root}
}

// runScript runs a rendered control script the way a runner does: the GW_ variables
// assigned (quoted) before the body, under /bin/sh, with bin first on PATH.
func runScript(t testing.TB, shell, body string, vars map[string]string, bin string) (string, error) {
	t.Helper()
	var pre strings.Builder
	for k, v := range vars {
		pre.WriteString(k + "=" + shellquote.Quote(v) + "\n")
	}
	cmd := exec.Command(shell, "-c", pre.String()+body)
	path := "/usr/local/bin:/usr/bin:/bin"
	if bin != "" {
		path = bin + ":" + path
	}
	cmd.Env = []string{"PATH=" + path, "HOME=" + os.Getenv("HOME")}
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	err := cmd.Run()
	return out.String(), err
}

// writeJob lays out the working directory as the executor does and writes JOB.
func writeJob(t testing.TB, inc events.IncarnatedData) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(inc.WorkDir, events.ControlDir), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(inc.WorkDir, events.ScriptFile), []byte(inc.Scripts[events.ScriptJob].Body), 0o700); err != nil {
		t.Fatal(err)
	}
}

// installStatics writes the static scripts where the plan says, as the executor does.
func installStatics(t testing.TB, inc events.IncarnatedData) {
	t.Helper()
	for _, s := range inc.StaticScripts {
		if err := os.MkdirAll(filepath.Dir(s.Location), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(s.Location, []byte(s.Body), 0o700); err != nil {
			t.Fatal(err)
		}
	}
}

// fakeBin writes executables (name → shell body) into a new directory.
func fakeBin(t testing.TB, cmds map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range cmds {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// waitFile waits for a one-line file the job writes when it ends, until its line is
// finished: the shell creates the file before it writes it, so an existing file may still
// be empty (as pkg/target's readers know). The bound only keeps a broken test from
// hanging; it asserts nothing about speed.
func waitFile(t testing.TB, path string) string {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		data, err := os.ReadFile(path)
		if err == nil && len(data) > 0 && data[len(data)-1] == '\n' {
			return string(data)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never appeared", path)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func nativeID(t testing.TB, pattern, out string) string {
	t.Helper()
	re, err := profile.CompileJava(pattern)
	if err != nil {
		t.Fatal(err)
	}
	m := re.FindStringSubmatch(strings.TrimSpace(out))
	if m == nil {
		t.Fatalf("native ID pattern %q does not match START's output %q", pattern, out)
	}
	return m[1]
}

// statusLines parses GET_JOB_STATUS output with the plan's pattern and state map.
func statusLines(t testing.TB, inc events.IncarnatedData, out string) map[string]string {
	t.Helper()
	re := regexp.MustCompile(inc.StatusPattern)
	got := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		m := re.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		got[m[re.SubexpIndex("id")]] = inc.NativeStates[m[re.SubexpIndex("state")]]
	}
	return got
}
