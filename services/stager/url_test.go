package stager

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/gridwire/gridwire/events"
)

func TestCheckURLs(t *testing.T) {
	for _, tc := range []struct {
		name string
		job  events.Job
		want []string // substrings of the error; nil means accepted
	}{
		{"every supported scheme", events.Job{
			StageIn: []events.FileCopy{{From: "file:///data/a", To: "a"}, {From: "https://h/x", To: "x"},
				{From: "sftp://u@h:2222/p", To: "p"}, {From: "scp://h/q", To: "q"}, {From: events.UploadURL("01J/f"), To: "f"},
				{From: "/abs/plain", To: "plain"}},
			Stdout: []string{"http://h/out", "file:///o"}}, nil},
		{"plain names against a base", events.Job{DefaultStorageBase: "sftp://store/jobs/{taskid}",
			StageIn: []events.FileCopy{{From: "in.dat", To: "in.dat"}}, Stdout: []string{"out"}}, nil},
		{"gsiftp is refused naming the supported schemes", events.Job{
			StageIn: []events.FileCopy{{From: "gsiftp://example.org/my/files/hello.txt", To: "hello.txt"}}},
			[]string{"stage_in[0].from", `"gsiftp"`, "supported: file, http, https, sftp, scp, gridwire-upload"}},
		{"gsiftp base", events.Job{DefaultStorageBase: "gsiftp://example.org/base"}, []string{"default_storage_base", "gsiftp"}},
		{"relative path without base", events.Job{Stdin: "in.txt"}, []string{"stdin", "default_storage_base"}},
		{"traversal", events.Job{StageIn: []events.FileCopy{{From: "/a", To: "../../etc/cron.d/x"}},
			StageOut: []events.FileCopy{{From: "/scratch/../etc/passwd", To: "/o"}}, Cleanup: []string{"a/../../b"}},
			[]string{"stage_in[0].to", "stage_out[0].from", "cleanup[0]"}},
		{"http directory cannot be listed", events.Job{StageIn: []events.FileCopy{{From: "http://h/dir/", To: "d"}}},
			[]string{"cannot be listed"}},
		{"bad when", events.Job{StageOut: []events.FileCopy{{From: "a", To: "/a", When: "sometimes"}}}, []string{"stage_out[0].when"}},
		{"multi-destination stderr", events.Job{Stderr: []string{"/ok", "ftp://h/x"}}, []string{"stderr[1]", "ftp"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckURLs(tc.job)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
	if err := CheckURLs(events.Job{Stdin: "gsiftp://h/x"}); !errors.Is(err, ErrScheme) {
		t.Errorf("scheme refusal is not ErrScheme: %v", err)
	}
}

func FuzzCheckURLs(f *testing.F) {
	for _, s := range []string{"gsiftp://ip/path/file", "file:///a", "http://[::1]:80/x", "/abs", "rel/../x",
		"sftp://u@h/p/", "scp://h:22/~/x", "c:\\x", "gridwire-upload://", "%zz", "HTTP://H/"} {
		f.Add(s, "file")
	}
	f.Fuzz(func(t *testing.T, remote, local string) {
		job := events.Job{StageIn: []events.FileCopy{{From: remote, To: local}}, Stdout: []string{remote}, Cleanup: []string{local}}
		if CheckURLs(job) != nil {
			return
		}
		// What CheckURLs accepts, the stager can plan without refusal.
		for _, it := range append(planIn(job, 1, nil), planOut(job, 1, true, nil)...) {
			if it.err != nil {
				t.Fatalf("accepted at submission, refused when planned: %v", it.err)
			}
			if !filepath.IsLocal(it.local) {
				t.Fatalf("planned local name %q leaves the working directory", it.local)
			}
		}
	})
}

func TestConfine(t *testing.T) {
	root := t.TempDir()
	outside := t.TempDir()
	mustLink := func(target, name string) {
		if err := os.Symlink(target, filepath.Join(root, name)); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(t, filepath.Join(root, "dir/file"), "f")
	mustLink(outside, "out")
	mustLink("dir", "in")
	mustLink(filepath.Join(root, "dir"), "in-abs")
	mustLink("../"+filepath.Base(root)+"/dir", "round-trip")
	mustLink("loop", "loop")
	mustLink("in/../..", "up")
	for name, ok := range map[string]bool{
		"dir/file": true, "new/name": true, "in/file": true, "in-abs/file": true, "round-trip/file": true,
		"out": false, "out/x": false, "loop": false, "up/x": false, "dir/../../x": false,
	} {
		err := confine(osFS{}, root, name)
		if (err == nil) != ok {
			t.Errorf("%s: confined=%v, want %v (%v)", name, err == nil, ok, err)
		}
		if err != nil && !errors.Is(err, ErrLocalName) {
			t.Errorf("%s: refusal is not ErrLocalName: %v", name, err)
		}
	}
}

func TestUploadThenStageFromTheBucket(t *testing.T) {
	e := newEnv(t)
	e.start(testConfig())
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "in.dat"), "uploaded file")
	writeFile(t, filepath.Join(dir, "tree/a"), "A")
	writeFile(t, filepath.Join(dir, "tree/b/c"), "C")
	writeFile(t, filepath.Join(dir, "stdin.txt"), "keyboard")
	var wrapped bytes.Buffer
	objects, n, err := Upload(t.Context(), BucketPut(e.bus.JS), []string{"in.dat", "tree", "stdin.txt", "in.dat"}, UploadOptions{Dir: dir,
		Wrap: func(name string, size int64, r io.Reader) io.Reader {
			wrapped.WriteString(filepath.Base(name) + " ")
			return r
		}})
	if err != nil {
		t.Fatal(err)
	}
	if n != 4 || len(objects) != 3 || !strings.HasSuffix(objects["tree"], "/tree/") || !strings.HasSuffix(objects["in.dat"], "/in.dat") {
		t.Fatalf("uploaded %d files as %v", n, objects)
	}
	for local, object := range objects {
		if err := events.CheckUploadName(object); err != nil {
			t.Errorf("%s uploaded as %v", local, err)
		}
	}
	// What ingest makes of the description once it has the objects.
	job := events.Job{Stdin: events.UploadURL(objects["stdin.txt"]), StageIn: []events.FileCopy{
		{From: events.UploadURL(objects["in.dat"]), To: "in.dat"}, {From: events.UploadURL(objects["tree"]), To: "tree", Directory: true}}}
	if wrapped.Len() == 0 {
		t.Error("Wrap was not used")
	}
	if err := CheckURLs(job); err != nil {
		t.Fatalf("rewritten job refused: %v", err)
	}
	id := e.incarnate(job, "local", "")
	st := e.waitStatus(id, events.StatusQueued)
	wd := st.Incarnation.WorkDir
	got := tree(t, wd)
	want := map[string]string{"in.dat": "uploaded file", "tree/a": "A", "tree/b/c": "C", events.StdinFile: "keyboard"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("working directory (-want +got):\n%s", diff)
	}
}
