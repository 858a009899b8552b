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

// renderStorages renders each storage's path for the job into c.storages (shell text,
// for the JOB script and <STORAGE:NAME>), and returns the paths that are plain words —
// no value only the target knows, nothing the shell would change — for the incarnation.
func (c *renderCtx) renderStorages(wd string) (map[string]string, error) {
	c.storages = map[string]string{}
	known := map[string]string{}
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
		c.storages[st.Name] = text
		if text != "" && shellquote.Quote(text) == text {
			known[st.Name] = text
		}
	}
	if _, ok := c.storages[uspace]; !ok {
		c.storages[uspace] = shellquote.Quote(wd)
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
	text, ok := c.storages[name]
	if !ok || c.storing {
		return profile.Value{}, false
	}
	return profile.Value{Text: text, Trusted: true}, true
}

// exportStorages writes GPE_STORAGE_<NAME>=<path> for every storage, in name order.
func (c *renderCtx) exportStorages(b []byte) []byte {
	for _, name := range slices.Sorted(maps.Keys(c.storages)) {
		v := storageEnvPrefix + envName(name)
		b = append(b, v+"="+c.storages[name]+"\nexport "+v+"\n"...)
	}
	return b
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
