package incarnator

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/pkg/shellquote"
	"github.com/gridwire/gridwire/pkg/substitute"
)

// The run-time names (events.RuntimeValues) stand for values only the target knows:
// the account's home, its login name, the host's CPU and OS. Ingest leaves them as
// {NAME} placeholders and lists them in Job.Substitutions; the JOB script fills them
// when it runs, on the target, by assigning each used name to a GW_SUB_ variable first
// and writing every job word that holds one as a concatenation of quoted literal parts
// and "$GW_SUB_NAME" (a double-quoted expansion: no splitting, no globbing, no second
// expansion of what the value holds). The contact (events.RuntimeContact) is filled at
// plan time (contactValue); names no target can fill are refused (events.RuntimeRefused).

// reservedVars names the reserved placeholders this job uses that the JOB script fills,
// or refuses a job that uses one no target can fill.
func reservedVars(job *events.Job) (map[string]bool, error) {
	var used map[string]bool
	for _, name := range job.Substitutions {
		if why, ok := events.RuntimeRefused[name]; ok {
			return nil, fmt.Errorf("substitution {%s}: %s", name, why)
		}
		if _, ok := events.RuntimeValues[name]; ok || name == events.RuntimeContact {
			if used == nil {
				used = map[string]bool{}
			}
			used[name] = true
		}
	}
	return used, nil
}

// assignReserved writes the GW_SUB_ assignments for the names used, in a fixed order.
func (c *renderCtx) assignReserved(b []byte) []byte {
	for _, name := range sortedKeys(c.reserved) {
		v, ok := events.RuntimeValues[name]
		if !ok { // events.RuntimeContact
			v = shellquote.Quote(c.contactValue())
		}
		b = append(b, "GW_SUB_"+name+"="+v+"\n"...)
	}
	return b
}

// contactValue is the resource manager contact: the one the job named, else the
// cluster's first host, else its name.
func (c *renderCtx) contactValue() string {
	if co := c.job.Coallocation; co != nil && co.Contact != "" {
		return co.Contact
	}
	if len(c.t.cl.Hosts) > 0 {
		return c.t.cl.Hosts[0]
	}
	return c.t.cl.Name
}

// word is s as one shell word, with the reserved placeholders the job uses expanded on
// the target.
func (c *renderCtx) word(s string) string {
	if len(c.reserved) == 0 || !strings.Contains(s, "{") {
		return shellquote.Quote(s)
	}
	marks := make(map[string]string, len(c.reserved))
	for name := range c.reserved {
		marks[name] = "\x00" + name + "\x00"
	}
	parts := strings.Split(substitute.Substitute(s, marks), "\x00")
	if len(parts) == 1 {
		return shellquote.Quote(s)
	}
	var b strings.Builder
	for i, p := range parts {
		switch {
		case i%2 == 1:
			b.WriteString(`"$GW_SUB_` + p + `"`)
		case p != "":
			b.WriteString(shellquote.Quote(p))
		}
	}
	return b.String()
}

// usesReserved reports whether s holds a placeholder the JOB script fills.
func (c *renderCtx) usesReserved(s string) bool {
	for _, n := range substitute.Names(s) {
		if c.reserved[n] {
			return true
		}
	}
	return false
}

func sortedKeys(m map[string]bool) []string { return slices.Sorted(maps.Keys(m)) }
