package stager

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gridwire/gridwire/pkg/classad"
)

// Transfer plugins move files for URL schemes the stager has no code of its own for
// (gsiftp:// through globus-url-copy, for one). A plugin is an external command the
// operator names, and the stager speaks to it in the manner of HTCondor's multi-file
// transfer plugins (docs/staging.md, "Transfer plugins", is the contract):
//
//   - COMMAND -classad prints one ClassAd with PluginType = "FileTransfer",
//     MultipleFileSupport = true and SupportedMethods listing the schemes, which must
//     include every scheme the operator configured for it (checked when the stager starts);
//   - COMMAND -infile IN -outfile OUT [-upload] moves the files IN lists, one ClassAd
//     [ Url = "..."; LocalFileName = "/abs/file" ] each, downloading Url into
//     LocalFileName, or with -upload sending LocalFileName to Url, and writes one result
//     ClassAd per file to OUT: TransferSuccess, TransferUrl, TransferFileName,
//     TransferTotalBytes, TransferError, and TransferRetryable = false for a failure no
//     retry can mend. Exit status 0 means every file moved.
//
// The stager hands a plugin one file per call, a temporary file on the gateway, so each
// attempt is its own transfer event and spends the file's own retry budget; it then
// moves the temporary file to or from the job's directory as it does any file.

// Plugin is one transfer command and the URL schemes it serves.
type Plugin struct {
	// Command is the program (an absolute path) and its leading arguments.
	Command []string `yaml:"command"`
	// Schemes are the URL schemes the plugin serves (lower case, none built in).
	Schemes []string `yaml:"schemes"`
	// Timeout bounds one call; 0 means DefaultPluginTimeout.
	Timeout time.Duration `yaml:"timeout,omitempty"`
}

// DefaultPluginTimeout bounds one plugin call when the config names no timeout.
const DefaultPluginTimeout = time.Hour

// ErrPlugin wraps a plugin's failure to keep the contract (no result, a bad result).
var ErrPlugin = errors.New("stager: transfer plugin")

var schemeName = regexp.MustCompile(`^[a-z][a-z0-9+.-]*$`)

func (p Plugin) validate(where string) error {
	var errs []error
	if len(p.Command) == 0 || !filepath.IsAbs(p.Command[0]) {
		errs = append(errs, fmt.Errorf("%s.command: want an absolute program path and its arguments", where))
	}
	if len(p.Schemes) == 0 {
		errs = append(errs, fmt.Errorf("%s.schemes: name at least one URL scheme", where))
	}
	for _, s := range p.Schemes {
		switch {
		case !schemeName.MatchString(s):
			errs = append(errs, fmt.Errorf("%s.schemes: %q is not a lower-case URL scheme", where, s))
		case slices.Contains(schemes, s):
			errs = append(errs, fmt.Errorf("%s.schemes: %q is built into the stager", where, s))
		}
	}
	if p.Timeout < 0 {
		errs = append(errs, fmt.Errorf("%s.timeout: %s < 0", where, p.Timeout))
	}
	return errors.Join(errs...)
}

// validatePlugins checks every plugin and that no scheme has two.
func validatePlugins(ps []Plugin) error {
	var errs []error
	seen := map[string]int{}
	for i, p := range ps {
		where := fmt.Sprintf("stager.plugins[%d]", i)
		errs = append(errs, p.validate(where))
		for _, s := range p.Schemes {
			if j, ok := seen[s]; ok {
				errs = append(errs, fmt.Errorf("%s.schemes: %q is plugins[%d]'s too", where, s, j))
			}
			seen[s] = i
		}
	}
	return errors.Join(errs...)
}

// schemeSet is a set of URL schemes.
type schemeSet map[string]bool

func (s schemeSet) sorted() []string {
	out := make([]string, 0, len(s))
	for k := range s {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func pluginSchemes(ps []Plugin) schemeSet {
	set := schemeSet{}
	for _, p := range ps {
		for _, s := range p.Schemes {
			set[s] = true
		}
	}
	return set
}

// plugins is the stager's table of plugins by scheme.
type plugins struct {
	byScheme map[string]*pluginEndpoint
}

func (p plugins) schemes() schemeSet {
	set := schemeSet{}
	for s := range p.byScheme {
		set[s] = true
	}
	return set
}

// startPlugins asks every plugin what it serves (-classad) and refuses one that does
// not serve the schemes it is configured for, or does not take -infile/-outfile.
func startPlugins(ctx context.Context, ps []Plugin, policy hostPolicy, res Resolver) (plugins, error) {
	out := plugins{byScheme: map[string]*pluginEndpoint{}}
	for i, p := range ps {
		if p.Timeout == 0 {
			p.Timeout = DefaultPluginTimeout
		}
		if err := queryPlugin(ctx, p); err != nil {
			return out, fmt.Errorf("stager: plugins[%d] (%s): %w", i, p.Command[0], err)
		}
		ep := &pluginEndpoint{p: p, policy: policy, res: res}
		for _, s := range p.Schemes {
			out.byScheme[s] = ep
		}
	}
	return out, nil
}

func queryPlugin(ctx context.Context, p Plugin) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, p.Command[0], append(slices.Clone(p.Command[1:]), "-classad")...)
	var stderr bytes.Buffer
	cmd.Stderr = &limitedBuffer{b: &stderr, n: 4096}
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("%w: -classad: %v: %s", ErrPlugin, err, strings.TrimSpace(stderr.String()))
	}
	ads, err := classad.Parse(out)
	if err != nil || len(ads) == 0 {
		return fmt.Errorf("%w: -classad printed no ClassAd: %v", ErrPlugin, err)
	}
	ad := ads[0]
	if t, _ := ad.String("PluginType"); t != "FileTransfer" {
		return fmt.Errorf("%w: PluginType %q, want \"FileTransfer\"", ErrPlugin, t)
	}
	if multi, _ := ad.Bool("MultipleFileSupport"); !multi {
		return fmt.Errorf("%w: MultipleFileSupport is not true: gridwire calls plugins with -infile and -outfile", ErrPlugin)
	}
	methods, _ := ad.String("SupportedMethods")
	have := map[string]bool{}
	for _, m := range strings.Split(methods, ",") {
		have[strings.ToLower(strings.TrimSpace(m))] = true
	}
	for _, s := range p.Schemes {
		if !have[s] {
			return fmt.Errorf("%w: configured for %q, but its SupportedMethods are %q", ErrPlugin, s, methods)
		}
	}
	return nil
}

// pluginEndpoint is the remote end of a transfer through a plugin. Names are URLs.
type pluginEndpoint struct {
	p      Plugin
	policy hostPolicy
	res    Resolver
}

// open downloads name into a temporary file and reads it from there; closing removes it.
func (e *pluginEndpoint) open(ctx context.Context, name string) (io.ReadCloser, int64, error) {
	dir, err := os.MkdirTemp("", "gridwire-plugin-")
	if err != nil {
		return nil, 0, err
	}
	local := filepath.Join(dir, "file")
	if err := e.transfer(ctx, name, local, false); err != nil {
		os.RemoveAll(dir)
		return nil, 0, err
	}
	f, err := os.Open(local)
	if err != nil {
		os.RemoveAll(dir)
		return nil, 0, fmt.Errorf("%w: reading what it downloaded: %v", ErrPlugin, err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		os.RemoveAll(dir)
		return nil, 0, err
	}
	return readCloser{f, func() error { return errors.Join(f.Close(), os.RemoveAll(dir)) }}, fi.Size(), nil
}

// put writes r to a temporary file and has the plugin upload it to name.
func (e *pluginEndpoint) put(ctx context.Context, name string, r io.Reader, size int64) error {
	dir, err := os.MkdirTemp("", "gridwire-plugin-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	local := filepath.Join(dir, "file")
	f, err := os.OpenFile(local, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if err := errors.Join(copyBuffered(f, r), f.Close()); err != nil {
		return err
	}
	return e.transfer(ctx, name, local, true)
}

func (e *pluginEndpoint) list(ctx context.Context, dir string) ([]string, error) {
	return nil, fmt.Errorf("%w: %s: a transfer plugin moves single files, not directories", ErrRemote, dir)
}

// transfer runs the plugin for one file, after the URL's host passed the network policy
// (the plugin dials by itself, so its addresses are checked here, once).
func (e *pluginEndpoint) transfer(ctx context.Context, rawURL, local string, upload bool) error {
	if err := e.checkHost(ctx, rawURL); err != nil {
		return err
	}
	dir := filepath.Dir(local)
	in, out := filepath.Join(dir, "in.ad"), filepath.Join(dir, "out.ad")
	ad := classad.Ad{{Name: "Url", Value: rawURL}, {Name: "LocalFileName", Value: local}}
	if err := os.WriteFile(in, []byte(ad.Format()+"\n"), 0o600); err != nil {
		return err
	}
	args := append(slices.Clone(e.p.Command[1:]), "-infile", in, "-outfile", out)
	if upload {
		args = append(args, "-upload")
	}
	ctx, cancel := context.WithTimeout(ctx, e.p.Timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, e.p.Command[0], args...)
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var stderr bytes.Buffer
	cmd.Stderr = &limitedBuffer{b: &stderr, n: 4096}
	runErr := cmd.Run()
	if ctx.Err() != nil {
		return fmt.Errorf("%w %s: %v", ErrPlugin, e.p.Command[0], context.Cause(ctx))
	}
	return pluginResult(out, rawURL, runErr, strings.TrimSpace(stderr.String()))
}

// pluginResult reads the result ClassAd for rawURL from the outfile.
func pluginResult(outfile, rawURL string, runErr error, stderr string) error {
	data, err := os.ReadFile(outfile)
	if err != nil {
		return fmt.Errorf("%w wrote no result (%v; exit: %v): %s", ErrPlugin, err, runErr, stderr)
	}
	ads, err := classad.Parse(data)
	if err != nil {
		return fmt.Errorf("%w result: %w", ErrPlugin, err)
	}
	var res classad.Ad
	for _, ad := range ads {
		if u, ok := ad.String("TransferUrl"); !ok || u == rawURL {
			res = ad
			break
		}
	}
	ok, haveOK := res.Bool("TransferSuccess")
	switch {
	case !haveOK:
		return fmt.Errorf("%w result for %s has no TransferSuccess (exit: %v): %s", ErrPlugin, rawURL, runErr, stderr)
	case ok && runErr == nil:
		return nil
	case ok:
		return fmt.Errorf("%w said TransferSuccess but exited: %v: %s", ErrPlugin, runErr, stderr)
	}
	msg, _ := res.String("TransferError")
	if msg == "" {
		msg = "failed without TransferError: " + stderr
	}
	err = fmt.Errorf("%w: %s", ErrPlugin, msg)
	if retry, set := res.Bool("TransferRetryable"); set && !retry {
		return permanent{err}
	}
	return err
}

// checkHost applies the stager's network policy to the URL's host and the addresses it
// resolves to now.
func (e *pluginEndpoint) checkHost(ctx context.Context, rawURL string) error {
	u, err := url.Parse(rawURL)
	if err != nil {
		return permanent{fmt.Errorf("%w: %q: %v", ErrRemote, rawURL, err)}
	}
	host := u.Hostname()
	if host == "" {
		return permanent{fmt.Errorf("%w: %q: no host", ErrRemote, rawURL)}
	}
	if err := e.policy.checkName(host); err != nil {
		return permanent{err}
	}
	res := e.res
	if res == nil {
		res = net.DefaultResolver
	}
	addrs, err := e.policy.lookup(ctx, res, host)
	if err != nil {
		return err
	}
	port, _ := strconv.ParseUint(u.Port(), 10, 16)
	for _, a := range addrs {
		if err := e.policy.checkDial(host, netip.AddrPortFrom(a, uint16(port))); err != nil {
			return permanent{err}
		}
	}
	return nil
}

// limitedBuffer keeps the first n bytes written to it and drops the rest.
type limitedBuffer struct {
	b *bytes.Buffer
	n int
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if room := l.n - l.b.Len(); room > 0 {
		l.b.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}
