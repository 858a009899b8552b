package stager

import (
	"errors"
	"fmt"
	"net/url"
	"path"
	"path/filepath"
	"strings"

	"github.com/gridwire/gridwire/events"
)

// URL schemes the stager moves files with. SchemeSCP is an alias of SchemeSFTP.
const (
	SchemeFile   = "file"
	SchemeHTTP   = "http"
	SchemeHTTPS  = "https"
	SchemeSFTP   = "sftp"
	SchemeSCP    = "scp"
	SchemeUpload = events.SchemeUpload // an object in UploadBucket, uploaded with the job
)

// schemes lists every supported scheme, in the order error messages name them.
var schemes = []string{SchemeFile, SchemeHTTP, SchemeHTTPS, SchemeSFTP, SchemeSCP, SchemeUpload}

// Schemes returns the supported URL schemes.
func Schemes() []string { return append([]string(nil), schemes...) }

// Errors a job's staging lists can be refused with, at submission or when staging.
var (
	ErrScheme    = errors.New("stager: unsupported URL scheme")
	ErrLocalName = errors.New("stager: local name leaves the working directory")
	ErrRemote    = errors.New("stager: bad remote name")
)

// remote is a resolved remote name: a parsed URL, or an absolute path on the gateway.
type remote struct {
	raw string   // as the job gave it, after default_storage_base
	url *url.URL // scheme lower-cased; file URLs and plain paths have Scheme "file"
	dir bool     // the name ends in '/'
}

// resolveRemote turns a job's remote name into a URL: a URL as it is, a plain path
// against default_storage_base, an absolute plain path as a file on the gateway. plug
// holds the schemes the operator's transfer plugins add to the built-in ones.
func resolveRemote(name, base string, plug schemeSet) (remote, error) {
	if err := checkName(name, ErrRemote); err != nil {
		return remote{}, err
	}
	if len(base) > MaxNameBytes {
		return remote{}, fmt.Errorf("%w: default_storage_base is longer than %d bytes", ErrRemote, MaxNameBytes)
	}
	raw := name
	if !events.HasScheme(name) {
		switch {
		case base != "":
			raw = joinBase(base, name)
		case strings.HasPrefix(name, "/"):
			raw = "file://" + name
		default:
			return remote{}, fmt.Errorf("%w: %q is a relative path and the job has no default_storage_base", ErrRemote, name)
		}
	}
	u, err := url.Parse(raw)
	if err != nil {
		return remote{}, fmt.Errorf("%w: %q: %v", ErrRemote, name, err)
	}
	u.Scheme = strings.ToLower(u.Scheme)
	if !supported(u.Scheme) && !plug[u.Scheme] {
		return remote{}, fmt.Errorf("%w: %q in %q; supported: %s", ErrScheme, u.Scheme, name, strings.Join(append(Schemes(), plug.sorted()...), ", "))
	}
	if err := checkURL(u); err != nil {
		return remote{}, fmt.Errorf("%w: %q: %v", ErrRemote, name, err)
	}
	return remote{raw: raw, url: u, dir: strings.HasSuffix(raw, "/")}, nil
}

func checkURL(u *url.URL) error {
	switch u.Scheme {
	case SchemeFile:
		if u.Host != "" && u.Host != "localhost" {
			return fmt.Errorf("file URL names host %q; only local files are file URLs", u.Host)
		}
		if !path.IsAbs(u.Path) {
			return errors.New("file URL needs an absolute path")
		}
	case SchemeHTTP, SchemeHTTPS, SchemeSFTP, SchemeSCP:
		if u.Hostname() == "" {
			return errors.New("no host")
		}
	case SchemeUpload:
		if objectName(u) == "" {
			return errors.New("no object name")
		}
	}
	return nil
}

func joinBase(base, name string) string {
	return strings.TrimSuffix(base, "/") + "/" + strings.TrimPrefix(name, "/")
}

func supported(scheme string) bool {
	for _, s := range schemes {
		if s == scheme {
			return true
		}
	}
	return false
}

// localName checks a name in the job's working directory: relative, not leaving it,
// and not in gridwire's own control directory. It returns the cleaned name.
func localName(name string) (string, error) {
	if err := checkName(name, ErrLocalName); err != nil {
		return "", err
	}
	clean := filepath.Clean(filepath.FromSlash(name))
	if !filepath.IsLocal(clean) {
		return "", fmt.Errorf("%w: %q must be a relative path without '..'", ErrLocalName, name)
	}
	if clean == events.ControlDir || strings.HasPrefix(clean, events.ControlDir+string(filepath.Separator)) {
		return "", fmt.Errorf("%w: %q is inside gridwire's control directory %s", ErrLocalName, name, events.ControlDir)
	}
	return filepath.ToSlash(clean), nil
}

// MaxNameBytes bounds every staging name, remote or local, before anything parses it
// (Linux's PATH_MAX is 4096; a URL is a host and a path).
const MaxNameBytes = 8192

// checkName is the size and character budget of a staging name: not empty, not over
// MaxNameBytes, and no NUL or other control character, which no file name on a target
// should carry and no URL may.
func checkName(name string, kind error) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: empty", kind)
	case len(name) > MaxNameBytes:
		return fmt.Errorf("%w: %.64q... is longer than %d bytes", kind, name, MaxNameBytes)
	case strings.ContainsFunc(name, isControl):
		return fmt.Errorf("%w: %q holds a control character", kind, name)
	}
	return nil
}

// CheckURLs refuses a job whose staging names cannot be staged: unsupported schemes (the
// message lists the supported ones), relative remote paths with no default_storage_base
// (but a relative stdout or stderr destination is a file in the job's directory), and
// local names that leave the job's directory. Absolute cleanup paths pass here: whether
// the policy lets the stager remove them depends on where the job runs. Ingest calls it
// at submission.
func CheckURLs(job events.Job) error { return Config{}.CheckURLs(job) }

// CheckURLs is the package's CheckURLs with the schemes of the config's transfer
// plugins accepted too.
func (c Config) CheckURLs(job events.Job) error {
	plug := pluginSchemes(c.Plugins)
	var errs []error
	check := func(field string, err error) {
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", field, err))
		}
	}
	base := job.DefaultStorageBase
	if base != "" {
		if _, err := resolveRemote(base+"/", "", plug); err != nil {
			check("default_storage_base", err)
		}
	}
	for i, f := range job.StageIn {
		field := fmt.Sprintf("stage_in[%d]", i)
		r, err := resolveRemote(f.From, base, plug)
		check(field+".from", err)
		if err == nil && (r.dir || f.Directory) && !listable(r.url.Scheme) {
			check(field+".from", fmt.Errorf("%w: %q: a %s directory cannot be listed", ErrRemote, f.From, r.url.Scheme))
		}
		_, _, err = nodeName(f.To)
		check(field+".to", err)
	}
	for i, f := range job.StageOut {
		field := fmt.Sprintf("stage_out[%d]", i)
		_, _, err := nodeName(f.From)
		check(field+".from", err)
		_, err = resolveRemote(f.To, base, plug)
		check(field+".to", err)
		check(field+".when", checkWhen(f.When))
	}
	if job.Stdin != "" {
		_, err := resolveRemote(job.Stdin, base, plug)
		check("stdin", err)
	}
	for i, s := range job.Stdout {
		check(fmt.Sprintf("stdout[%d]", i), checkDestination(s, base, plug))
	}
	for i, s := range job.Stderr {
		check(fmt.Sprintf("stderr[%d]", i), checkDestination(s, base, plug))
	}
	for i, c := range job.Cleanup {
		check(fmt.Sprintf("cleanup[%d]", i), checkCleanup(c))
	}
	if job.MaxTransferAttempts < 0 {
		check("max_transfer_attempts", fmt.Errorf("%w: %d < 0", ErrRemote, job.MaxTransferAttempts))
	}
	return errors.Join(errs...)
}

// When values of FileCopy.When.
const (
	WhenAlways  = "always"
	WhenSuccess = "success"
	WhenFailure = "failure"
)

func checkWhen(w string) error {
	switch w {
	case "", WhenAlways, WhenSuccess, WhenFailure:
		return nil
	}
	return fmt.Errorf("%w: when %q is not always, success or failure", ErrRemote, w)
}

// listable reports whether a scheme can list a directory for stage-in (a transfer
// plugin moves single files).
func listable(scheme string) bool {
	switch scheme {
	case SchemeFile, SchemeSFTP, SchemeSCP, SchemeUpload:
		return true
	}
	return false
}

// checkDestination checks a stdout or stderr destination: a file in the job's directory,
// or a remote name.
func checkDestination(dest, base string, plug schemeSet) error {
	if isJobFile(dest, base) {
		_, err := localName(dest)
		return err
	}
	_, err := resolveRemote(dest, base, plug)
	return err
}

// checkCleanup checks a cleanup entry: a name in the job's directory, or an absolute
// path (without '..'), which the policy judges when the job has run.
func checkCleanup(name string) error {
	if strings.HasPrefix(name, "/") {
		_, err := targetName(name)
		return err
	}
	_, err := localName(name)
	return err
}
