package ingest

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/gridwire/gridwire/events"
)

// HeaderUploads carries a submission's Uploads as a JSON object, on HTTP and NATS alike.
// A submitter that sends it, even as {}, says its local inputs are on its own disk.
const HeaderUploads = "Gridwire-Uploads"

// Uploads maps a description's local input names, exactly as the description writes
// them, to the objects of the upload bucket the submitter put those files in
// (<ULID>/<file>, ending in '/' for a directory uploaded file by file).
//
// A submission with Uploads (even empty) says its local inputs are files on the
// submitter's disk; ingest parses the description once, and each local input becomes
// the gridwire-upload URL of its object. Only names the description itself gives as
// local inputs can be mapped, and only onto upload objects, so a submitter cannot make
// a job differ from what its description says, except in where its own files are
// fetched from. Without Uploads a plain path keeps its meaning (a file on the gateway).
type Uploads map[string]string

// ErrUploadsRequired is wrapped by UploadsRequiredError.
var ErrUploadsRequired = errors.New("ingest: the description names local inputs that are not uploaded")

// UploadsRequiredError says which local inputs must be uploaded before the description
// can be accepted; nothing was appended.
type UploadsRequiredError struct {
	File  string
	Names []string // local input names as the description writes them, in document order
}

func (e *UploadsRequiredError) Error() string {
	return fmt.Sprintf("%s: upload these local inputs first: %s", e.File, strings.Join(e.Names, ", "))
}

// Unwrap makes errors.Is(err, ErrUploadsRequired) hold.
func (e *UploadsRequiredError) Unwrap() error { return ErrUploadsRequired }

// ParseUploads reads the HeaderUploads value; "" means no uploads offered (nil).
func ParseUploads(header string) (Uploads, error) {
	if header == "" {
		return nil, nil
	}
	up := Uploads{}
	if err := json.Unmarshal([]byte(header), &up); err != nil {
		return nil, fmt.Errorf("%w: %s is not a JSON object of names: %v", ErrInvalid, HeaderUploads, err)
	}
	return up, nil
}

// LocalInputs lists the inputs of the job that name files on the submitter's disk:
// stage-in sources and stdin given as plain paths (no URL scheme) when the job has no
// default_storage_base to resolve them against.
func LocalInputs(job events.Job) []string {
	if job.DefaultStorageBase != "" {
		return nil
	}
	var out []string
	for _, f := range job.StageIn {
		if isLocal(f.From) {
			out = append(out, f.From)
		}
	}
	if isLocal(job.Stdin) {
		out = append(out, job.Stdin)
	}
	return out
}

// resolveUploads turns every local input of the jobs into the gridwire-upload URL its
// name maps to. It refuses a mapping for a name the description does not give as a
// local input, an object that is not an upload object, and a directory for stdin; and
// reports every local input left unmapped in one UploadsRequiredError.
func resolveUploads(file string, jobs []events.Job, up Uploads) error {
	var missing, named []string
	for _, j := range jobs {
		for _, name := range LocalInputs(j) {
			named = append(named, name)
			if _, ok := up[name]; !ok && !slices.Contains(missing, name) {
				missing = append(missing, name)
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(up)) {
		if !slices.Contains(named, name) {
			return fmt.Errorf("%w: %s: %s maps %q, which the description does not name as a local input", ErrInvalid, file, HeaderUploads, name)
		}
		if err := events.CheckUploadName(up[name]); err != nil {
			return fmt.Errorf("%w: %s: %s: the upload of %q: %v", ErrInvalid, file, HeaderUploads, name, err)
		}
	}
	if len(missing) > 0 {
		return &UploadsRequiredError{File: file, Names: missing}
	}
	for i := range jobs {
		if err := uploadNames(&jobs[i], up); err != nil {
			return fmt.Errorf("%w: %s: job %d: %v", ErrInvalid, file, i, err)
		}
	}
	return nil
}

// uploadNames rewrites one job's local inputs to their upload URLs.
func uploadNames(job *events.Job, up Uploads) error {
	if job.DefaultStorageBase != "" {
		return nil
	}
	for k := range job.StageIn {
		c := &job.StageIn[k]
		if isLocal(c.From) {
			c.Directory = strings.HasSuffix(up[c.From], "/")
			c.From = events.UploadURL(up[c.From])
		}
	}
	if isLocal(job.Stdin) {
		if strings.HasSuffix(up[job.Stdin], "/") {
			return fmt.Errorf("stdin %s was uploaded as a directory", job.Stdin)
		}
		job.Stdin = events.UploadURL(up[job.Stdin])
	}
	return nil
}

func isLocal(name string) bool { return name != "" && !events.HasScheme(name) }
