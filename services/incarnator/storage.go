package incarnator

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/gridwire/gridwire/pkg/shellquote"
	"github.com/gridwire/gridwire/services/incarnator/profile"
)

// Storages (GPE OS profile §3) name file spaces on the target, each with a template that
// builds its path (HOME from USER_NAME, SCRATCH from a user profile field, ...). For a
// job gridwire renders every storage's path: templates reach it as <STORAGE:NAME>, the
// job's program as the environment variable GPE_STORAGE_NAME, and the stager, through
// the incarnation's Storages, where the operator's target paths name the storage.

// uspace is the storage of the job's own working directory (GPE's USPACE), given when
// the profile does not define it.
const uspace = "USPACE"

// storageEnvPrefix starts the environment variable a storage's path is exported as.
const storageEnvPrefix = "GPE_STORAGE_"

// storagePaths are the profile's storage paths for a job: as shell text (for the JOB
// script and <STORAGE:NAME>), as plain paths where they are plain words — no value
// only the target knows, nothing the shell would change — for the incarnation, and the
// JOB script's export lines. USPACE, the job's own directory, is added per job.
type storagePaths struct {
	text   map[string]string
	known  map[string]string
	export []byte
}

// prepareStorages renders the storages once when no path depends on the job (a job
// value or a user profile field): most profiles' are the same for every job.
func (t *target) prepareStorages() error {
	c := &renderCtx{t: t}
	sp, err := c.renderStorages()
	if c.jobDependent {
		return nil
	}
	if err != nil {
		return err
	}
	t.storages = sp
	return nil
}

// renderStorages renders each of the profile's storages.
func (c *renderCtx) renderStorages() (*storagePaths, error) {
	sp := &storagePaths{text: map[string]string{}, known: map[string]string{}}
	c.storing = true
	defer func() { c.storing = false }()
	for _, st := range c.t.prof.Storages {
		tm := c.t.prof.Template(st.Template)
		inv := tm.Invocation("")
		if inv == nil || inv.Body == nil {
			return nil, fmt.Errorf("storage %s: template %s has no default Body variation", st.Name, st.Template)
		}
		out, err := tm.ExpandInvocation(inv, c.sources(), nil)
		if err != nil {
			return nil, fmt.Errorf("rendering storage %s: %w", st.Name, err)
		}
		text := strings.TrimSpace(string(out))
		sp.text[st.Name] = text
		if text != "" && shellquote.Quote(text) == text {
			sp.known[st.Name] = text
		}
	}
	for _, name := range slices.Sorted(maps.Keys(sp.text)) {
		sp.export = exportLine(sp.export, name, sp.text[name])
	}
	return sp, nil
}

// jobStorages sets the job's storages (the target's, rendered once, or the job's own)
// and returns the paths the incarnation records.
func (c *renderCtx) jobStorages(wd string) (map[string]string, error) {
	sp := c.t.storages
	if sp == nil {
		var err error
		if sp, err = c.renderStorages(); err != nil {
			return nil, err
		}
	}
	c.storages, c.wd = sp, wd
	known := make(map[string]string, len(sp.known)+1)
	maps.Copy(known, sp.known)
	if _, ok := sp.text[uspace]; !ok {
		known[uspace] = wd
	}
	return known, nil
}

// storage is the path of the named storage as shell text. A storage's own template
// cannot name another storage (their order would decide the path).
func (c *renderCtx) storage(name string) (profile.Value, bool) {
	if c.job == nil {
		c.jobDependent = true
		return profile.Value{Text: "/"}, true
	}
	if c.storing || c.storages == nil {
		return profile.Value{}, false
	}
	if text, ok := c.storages.text[name]; ok {
		return profile.Value{Text: text, Trusted: true}, true
	}
	if name == uspace {
		return profile.Value{Text: shellquote.Quote(c.wd), Trusted: true}, true
	}
	return profile.Value{}, false
}

// exportStorages writes GPE_STORAGE_<NAME>=<path> for every storage, then USPACE's
// unless the profile defines it.
func (c *renderCtx) exportStorages(b []byte) []byte {
	if c.storages == nil {
		return b
	}
	b = append(b, c.storages.export...)
	if _, ok := c.storages.text[uspace]; !ok {
		b = exportLine(b, uspace, shellquote.Quote(c.wd))
	}
	return b
}

func exportLine(b []byte, name, text string) []byte {
	v := storageEnvPrefix + envName(name)
	return append(b, v+"="+text+"\nexport "+v+"\n"...)
}

// envName makes a storage name a shell name: every other character becomes '_'.
func envName(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '_' || r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			return r
		}
		return '_'
	}, s)
}
