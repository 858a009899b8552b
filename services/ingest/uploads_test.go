package ingest

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/gridwire/gridwire/events"
)

// memStore is an in-memory Store: it keeps what Create is given.
type memStore struct{ created []events.Event }

func (m *memStore) Create(_ context.Context, e events.Event) (uint64, error) {
	m.created = append(m.created, e)
	return uint64(len(m.created)), nil
}

const withLocalInputs = `{"version":3,"executable":"/bin/cat","arguments":["in.txt"],"stdin":"keys.txt",
 "input_files":{"in.txt":"data/in.txt","tree":"tree","web":"https://example.org/x","abs":"/srv/shared/a"}}`

func submittedJob(t *testing.T, e events.Event) events.Job {
	t.Helper()
	var j events.Job
	if err := json.Unmarshal(e.Data, &j); err != nil {
		t.Fatal(err)
	}
	return j
}

// TestUploadsResolvedWhileParsing: the server parses the description once, says which
// local inputs it needs, and with their objects turns exactly those into upload URLs.
func TestUploadsResolvedWhileParsing(t *testing.T) {
	store := &memStore{}
	svc, err := New(Config{}, Deps{Store: store})
	if err != nil {
		t.Fatal(err)
	}
	submit := func(up Uploads) error {
		_, err := svc.Submit(context.Background(), Submission{File: "job.json", Data: []byte(withLocalInputs), Uploads: up})
		return err
	}
	var need *UploadsRequiredError
	if err := submit(Uploads{}); !errors.As(err, &need) || !errors.Is(err, ErrUploadsRequired) {
		t.Fatalf("no uploads yet: %v", err)
	}
	if want := []string{"data/in.txt", "tree", "/srv/shared/a", "keys.txt"}; !slices.Equal(need.Names, want) {
		t.Errorf("names to upload %q, want %q", need.Names, want)
	}
	if err := submit(Uploads{"data/in.txt": "01J00000000000000000000000/in.txt"}); !errors.As(err, &need) || len(need.Names) != 3 {
		t.Errorf("some uploads: %v", err)
	}
	if len(store.created) != 0 {
		t.Fatalf("%d events created before the uploads were complete", len(store.created))
	}
	up := Uploads{"data/in.txt": "01J00000000000000000000000/in.txt", "tree": "01J00000000000000000000001/tree/",
		"/srv/shared/a": "01J00000000000000000000002/a", "keys.txt": "01J00000000000000000000003/keys.txt"}
	if err := submit(up); err != nil {
		t.Fatal(err)
	}
	if len(store.created) != 1 {
		t.Fatalf("%d events, want 1", len(store.created))
	}
	j := submittedJob(t, store.created[0])
	want := map[string]events.FileCopy{
		"in.txt": {From: "gridwire-upload://01J00000000000000000000000/in.txt", To: "in.txt"},
		"tree":   {From: "gridwire-upload://01J00000000000000000000001/tree/", To: "tree", Directory: true},
		"web":    {From: "https://example.org/x", To: "web"},
		"abs":    {From: "gridwire-upload://01J00000000000000000000002/a", To: "abs"},
	}
	for _, c := range j.StageIn {
		c.Attempts, c.When = 0, ""
		if w := want[c.To]; c != w {
			t.Errorf("stage-in %+v, want %+v", c, w)
		}
	}
	if j.Stdin != "gridwire-upload://01J00000000000000000000003/keys.txt" || j.Executable != "/bin/cat" {
		t.Errorf("stdin %q executable %q", j.Stdin, j.Executable)
	}
}

// TestUploadsCannotChangeTheJob: a submitter can only say where its own local inputs
// were uploaded; everything else is what the description says.
func TestUploadsCannotChangeTheJob(t *testing.T) {
	store := &memStore{}
	svc, _ := New(Config{}, Deps{Store: store})
	full := func(edit func(Uploads)) Uploads {
		up := Uploads{"data/in.txt": "01J00000000000000000000000/in.txt", "tree": "01J00000000000000000000001/tree/",
			"/srv/shared/a": "01J00000000000000000000002/a", "keys.txt": "01J00000000000000000000003/keys.txt"}
		edit(up)
		return up
	}
	for name, up := range map[string]Uploads{
		"a name the description does not have": full(func(u Uploads) { u["/etc/passwd"] = "01J00000000000000000000004/passwd" }),
		"a URL the description does not have":  full(func(u Uploads) { u["https://example.org/x"] = "01J00000000000000000000004/x" }),
		"an object elsewhere":                  full(func(u Uploads) { u["data/in.txt"] = "https://evil.example/x" }),
		"an object outside the bucket's names": full(func(u Uploads) { u["data/in.txt"] = "01J00000000000000000000000/../x" }),
		"stdin as a directory":                 full(func(u Uploads) { u["keys.txt"] = "01J00000000000000000000003/keys/" }),
	} {
		_, err := svc.Submit(context.Background(), Submission{File: "job.json", Data: []byte(withLocalInputs), Uploads: up})
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want a refusal", name, err)
		}
	}
	if len(store.created) != 0 {
		t.Fatalf("a refused submission created %d events", len(store.created))
	}
	// Without Uploads plain paths keep their meaning: a file on the gateway.
	if _, err := svc.Submit(context.Background(), Submission{File: "job.json",
		Data: []byte(`{"version":3,"executable":"/bin/cat","input_files":{"a":"/srv/shared/a"}}`)}); err != nil {
		t.Fatal(err)
	}
	if j := submittedJob(t, store.created[0]); j.StageIn[0].From != "/srv/shared/a" {
		t.Errorf("a gateway path became %q", j.StageIn[0].From)
	}
	// A job with a default_storage_base has no local inputs: nothing to upload.
	if _, err := svc.Submit(context.Background(), Submission{File: "job.json", Uploads: Uploads{},
		Data: []byte(`{"version":3,"executable":"x","default_storage_base":"https://example.org/base/","input_files":{"a":"a"}}`)}); err != nil {
		t.Errorf("a description with a storage base: %v", err)
	}
}

func TestUploadsOverHTTP(t *testing.T) {
	store := &memStore{}
	svc, _ := New(Config{}, Deps{Store: store})
	post := func(header string) (int, map[string]map[string]any) {
		req := httptest.NewRequest(http.MethodPost, "/v1/jobs?file=job.json", strings.NewReader(withLocalInputs))
		if header != "" {
			req.Header.Set(HeaderUploads, header)
		}
		rec := httptest.NewRecorder()
		svc.ServeHTTP(rec, req)
		var body map[string]map[string]any
		_ = json.Unmarshal(rec.Body.Bytes(), &body)
		return rec.Code, body
	}
	code, body := post("{}")
	if code != http.StatusConflict || body["error"]["code"] != "uploads_required" || len(body["error"]["details"].([]any)) != 4 {
		t.Fatalf("%d %v", code, body)
	}
	if code, body = post(`["not","an","object"]`); code != http.StatusUnprocessableEntity || !strings.Contains(body["error"]["detail"].(string), HeaderUploads) {
		t.Errorf("a malformed header: %d %v", code, body)
	}
	up, _ := json.Marshal(Uploads{"data/in.txt": "01J00000000000000000000000/in.txt", "tree": "01J00000000000000000000001/tree/",
		"/srv/shared/a": "01J00000000000000000000002/a", "keys.txt": "01J00000000000000000000003/keys.txt"})
	if code, body = post(string(up)); code != http.StatusCreated || len(store.created) != 1 {
		t.Errorf("with every upload: %d %v", code, body)
	}
}

// The spec's relative STDIN in a JRDL document is a file on the submitter's disk, asked
// for as an upload like a v3 description's, and staged from the upload once given.
func TestJRDLRelativeStdinIsUploaded(t *testing.T) {
	store := &memStore{}
	svc, err := New(Config{}, Deps{Store: store})
	if err != nil {
		t.Fatal(err)
	}
	doc := `<jrdl><job><executable><path><stringElement value="/bin/cat"/></path></executable>
<stdin><path><stringElement value="STDIN"/></path></stdin></job></jrdl>`
	submit := func(up Uploads) error {
		_, err := svc.Submit(context.Background(), Submission{File: "job.jrdl", Data: []byte(doc), Uploads: up})
		return err
	}
	var need *UploadsRequiredError
	if err := submit(Uploads{}); !errors.As(err, &need) || !slices.Equal(need.Names, []string{"STDIN"}) {
		t.Fatalf("no uploads yet: %v", err)
	}
	if err := submit(Uploads{"STDIN": "01J00000000000000000000003/STDIN"}); err != nil {
		t.Fatal(err)
	}
	if j := submittedJob(t, store.created[len(store.created)-1]); j.Stdin != "gridwire-upload://01J00000000000000000000003/STDIN" {
		t.Errorf("stdin %q", j.Stdin)
	}
}
