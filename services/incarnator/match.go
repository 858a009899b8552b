package incarnator

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/pkg/cluster"
)

// exclusions returns every requirement of the job the target does not meet, each as a
// short reason naming the requirement where the description wrote it; none means the
// target can run the job. It reads the canonical requirements alone: ingest has already
// put every description language's terms, units and defaults into them.
func (t *target) exclusions(job *events.Job) []string {
	var why []string
	add := func(s string) {
		if s != "" {
			why = append(why, s)
		}
	}
	r := &job.Requirements
	for _, n := range r.Hosts {
		add(matchNames(n, "host_names", "is a host of this cluster", t.hostNames()))
	}
	for _, n := range r.Targets {
		add(matchNames(n, "target_names", "names this cluster", []string{t.cl.Name}))
	}
	for _, l := range r.LRMS {
		add(t.matchLRMS(l))
	}
	add(t.matchLRMSDefault(r))
	label := func(name string) string { return r.Origin(name).Label(name) }
	add(t.matchQueue(label("queue"), r.Queue))
	info := &t.cl.Info
	add(matchGlob(label("os_name"), "os_name", r.OSName, info.OSName))
	add(matchGlob(label("os_release"), "os_release", r.OSRelease, info.OSRelease))
	add(matchGlob(label("os_version"), "os_version", r.OSVersion, info.OSVersion))
	add(matchGlob(label("platform"), "platform", r.Platform, info.Platform))
	add(matchGlob(label("cpu_instruction_set"), "cpu_instruction_set", r.CPUInstructionSet, info.CPUInstructionSet))
	add(atLeast(label("smp_size"), "smp_size", r.SMPSize, info.SMPSize))
	add(t.matchProcessors(label("processors"), r.Processors))
	add(atLeast(label("ram_size"), "ram_size", r.RAMSize, info.RAMSize))
	add(atLeast(label("virtual_size"), "virtual_size", r.VirtualSize, info.VirtualSize))
	add(atLeast(label("cpu_hz"), "cpu_hz", r.CPUHz, info.CPUHz))
	for _, sc := range r.Software {
		add(matchSoftware(sc, info.Software))
	}
	for _, a := range r.Attributes {
		add(t.matchAttribute(a))
	}
	for _, u := range r.Unsupported {
		add(u.From.Label("requirement") + ": " + u.What)
	}
	add(t.matchApplication(job))
	return why
}

// hostNames are the target's host names without ports; a fork cluster is this host.
func (t *target) hostNames() []string {
	if len(t.cl.Hosts) == 0 {
		return t.localNames
	}
	out := make([]string, 0, len(t.cl.Hosts))
	for _, h := range t.cl.Hosts {
		out = append(out, splitHost(h))
	}
	return out
}

func splitHost(h string) string {
	if i := strings.LastIndexByte(h, ':'); i > 0 && !strings.HasSuffix(h, "]") {
		if _, err := strconv.Atoi(h[i+1:]); err == nil {
			h = h[:i]
		}
	}
	return strings.Trim(h, "[]")
}

// matchNames is met when one of the requirement's patterns matches one of names; what
// says what a matching name is, for the message.
func matchNames(n events.NameRequirement, fallback, what string, names []string) string {
	var wanted, bad []string
	for _, p := range n.AnyOf {
		ok, err := matchPattern(p, names)
		if ok {
			return ""
		}
		wanted = append(wanted, p.Pattern)
		if err != nil {
			bad = append(bad, fmt.Sprintf("%q is not a valid pattern: %v", p.Pattern, err))
		}
	}
	msg := fmt.Sprintf("%s: none of %s %s (%s)", n.From.Label(fallback), strings.Join(wanted, ", "), what, strings.Join(names, ", "))
	if len(bad) > 0 {
		msg += "; " + strings.Join(bad, "; ")
	}
	return msg
}

// matchPattern reports whether the pattern matches one of names; a regular expression
// that does not compile still matches a name equal to it.
func matchPattern(p events.NamePattern, names []string) (bool, error) {
	if p.Syntax != events.SyntaxRegexp {
		return slices.ContainsFunc(names, func(n string) bool { return globMatch(p.Pattern, n) }), nil
	}
	re, err := regexp.Compile(`^(?:` + p.Pattern + `)$`)
	for _, n := range names {
		if strings.EqualFold(n, p.Pattern) || err == nil && re.MatchString(n) {
			return true, nil
		}
	}
	return false, err
}

func isFork(lrms string) bool { return strings.EqualFold(lrms, events.LRMSFork) }

func (t *target) matchLRMS(l events.LRMSRule) string {
	switch {
	case l.Is != "" && !strings.EqualFold(l.Is, t.cl.LRMS):
		return fmt.Sprintf("%s: the job asks for %s, the cluster runs %s", l.From.Label("lrms_rules"), l.Is, t.cl.LRMS)
	case l.IsNot != "" && strings.EqualFold(l.IsNot, t.cl.LRMS):
		return fmt.Sprintf("%s: the job refuses %s, which the cluster runs", l.From.Label("lrms_rules"), t.cl.LRMS)
	}
	return ""
}

// matchLRMSDefault applies the job's rule for an LRMS it did not name. LRMSBatch keeps
// a job off Fork targets unless it names Fork; it is a rule for choosing between LRMSs,
// so a gateway whose clusters are all Fork (the default config's one "local" cluster)
// has nothing to choose and runs the job there.
func (t *target) matchLRMSDefault(r *events.Requirements) string {
	if r.LRMSDefault != events.LRMSBatch || !isFork(t.cl.LRMS) || r.Names(events.LRMSFork) || t.forkOnly {
		return ""
	}
	return fmt.Sprintf("%s: the cluster's LRMS is Fork, which the job takes only when it names Fork or no other LRMS is configured",
		r.Origin("lrms_default").Label("lrms_default"))
}

func (t *target) matchQueue(label, q string) string {
	if q == "" || slices.Contains(t.cl.Queues, q) {
		return ""
	}
	if len(t.cl.Queues) == 0 {
		return fmt.Sprintf("%s: the job asks for queue %s, the cluster has no queues", label, q)
	}
	return fmt.Sprintf("%s: the job asks for queue %s, the cluster has %s", label, q, strings.Join(t.cl.Queues, ", "))
}

func (t *target) chooseQueue(q string) string {
	if q != "" {
		return q
	}
	if len(t.cl.Queues) > 0 {
		return t.cl.Queues[0]
	}
	return ""
}

// matchGlob matches a requested pattern (with * and ?) against the target's value of
// the system info attribute name, ignoring case.
func matchGlob(label, name, want, have string) string {
	if want == "" {
		return ""
	}
	if have == "" {
		return fmt.Sprintf("%s: the job asks for %s, the cluster does not report its %s", label, want, name)
	}
	if !globMatch(want, have) {
		return fmt.Sprintf("%s: the job asks for %s, the cluster has %s", label, want, have)
	}
	return ""
}

// globMatch matches * (any run, '/' included) and ? (one byte), ignoring case; every
// other character is literal. It runs in O(len(pattern)*len(s)).
func globMatch(pattern, s string) bool {
	p, str := strings.ToLower(pattern), strings.ToLower(s)
	pi, si, star, mark := 0, 0, -1, 0
	for si < len(str) {
		switch {
		case pi < len(p) && (p[pi] == '?' || p[pi] == str[si]):
			pi++
			si++
		case pi < len(p) && p[pi] == '*':
			star, mark = pi, si
			pi++
		case star >= 0:
			pi = star + 1
			mark++
			si = mark
		default:
			return false
		}
	}
	for pi < len(p) && p[pi] == '*' {
		pi++
	}
	return pi == len(p)
}

func atLeast(label, name string, want, have int64) string {
	if want <= 0 {
		return ""
	}
	if have <= 0 {
		return fmt.Sprintf("%s: the job needs at least %d, the cluster does not report its %s", label, want, name)
	}
	if have < want {
		return fmt.Sprintf("%s: the job needs at least %d, the cluster has %d", label, want, have)
	}
	return ""
}

func matchSoftware(sc events.SoftwareConstraint, installed []cluster.Software) string {
	var versions []string
	for _, s := range installed {
		if !strings.EqualFold(s.Name, sc.Name) {
			continue
		}
		if sc.Op == "" || versionSatisfies(s.Version, sc.Op, sc.Version) {
			return ""
		}
		versions = append(versions, s.Version)
	}
	label := sc.From.Label("software")
	if len(versions) == 0 {
		return fmt.Sprintf("%s: the job needs %s, which the cluster does not have", label, sc)
	}
	return fmt.Sprintf("%s: the job needs %s, the cluster has %s %s", label, sc, sc.Name, strings.Join(versions, ", "))
}

func versionSatisfies(have, op, want string) bool {
	c := compareVersions(have, want)
	switch op {
	case "<":
		return c < 0
	case "<=":
		return c <= 0
	case "==", "=":
		return c == 0
	case ">":
		return c > 0
	case ">=":
		return c >= 0
	}
	return false
}

// compareVersions orders versions piece by piece: runs of digits compare as numbers
// (007 == 7, 10 > 9), runs of letters as text, separators only separate. When one runs
// out first, the missing numbers are zeros (6 == 6.0, 7.1 == 7.1.0, 6 < 6.0.1); a letter
// tag after the shared part makes the longer one earlier (1.0rc1 < 1.0).
func compareVersions(a, b string) int {
	pa, pb := versionPieces(a), versionPieces(b)
	for i := 0; i < len(pa) && i < len(pb); i++ {
		if c := comparePiece(pa[i], pb[i]); c != 0 {
			return c
		}
	}
	switch {
	case len(pa) < len(pb):
		return -tail(pb[len(pa):])
	case len(pa) > len(pb):
		return tail(pa[len(pb):])
	}
	return 0
}

// tail orders a version that goes on past another's end: zeros add nothing (6.0 == 6), a
// later non-zero number makes it later (6.0.1 > 6), a letter tag earlier (1.0rc1 < 1.0).
func tail(rest []string) int {
	for _, p := range rest {
		if p[0] < '0' || p[0] > '9' {
			return -1
		}
		if strings.TrimLeft(p, "0") != "" {
			return 1
		}
	}
	return 0
}

func versionPieces(v string) []string {
	var out []string
	start := -1
	kind := 0 // 1 digit, 2 letter
	for i := 0; i <= len(v); i++ {
		k := 0
		if i < len(v) {
			switch c := v[i]; {
			case c >= '0' && c <= '9':
				k = 1
			case c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
				k = 2
			}
		}
		if k != kind && start >= 0 {
			out = append(out, v[start:i])
			start = -1
		}
		if k != 0 && start < 0 {
			start = i
		}
		kind = k
	}
	return out
}

func comparePiece(a, b string) int {
	da, db := a[0] >= '0' && a[0] <= '9', b[0] >= '0' && b[0] <= '9'
	switch {
	case da && db:
		a, b = strings.TrimLeft(a, "0"), strings.TrimLeft(b, "0")
		if len(a) != len(b) {
			if len(a) < len(b) {
				return -1
			}
			return 1
		}
		return strings.Compare(a, b)
	case da:
		return 1 // 1.0 > 1.0rc: a number outranks a letter tag
	case db:
		return -1
	}
	return strings.Compare(strings.ToLower(a), strings.ToLower(b))
}

// matchProcessors compares a processor count with the cluster's "cpus" attribute, or its
// SMP size times its hosts; a batch cluster that reports neither is not excluded, since
// its size is the LRMS's business.
func (t *target) matchProcessors(label string, n int64) string {
	if n <= 0 {
		return ""
	}
	have := int64(0)
	if v, ok := t.attribute("cpus"); ok {
		have, _ = strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	} else if t.cl.Info.SMPSize > 0 {
		have = t.cl.Info.SMPSize * int64(max(1, len(t.cl.Hosts)))
	}
	if have > 0 && have < n {
		return fmt.Sprintf("%s: the job needs %d processors, the cluster has %d", label, n, have)
	}
	return ""
}

// attrKey reduces an attribute name to lower-case letters and digits, so "ram_available",
// "RAM-available" and "ramAvailable" in a config are one name.
func attrKey(k string) string {
	var b strings.Builder
	for _, c := range strings.ToLower(k) {
		if c >= 'a' && c <= 'z' || c >= '0' && c <= '9' {
			b.WriteRune(c)
		}
	}
	return b.String()
}

func (t *target) attribute(name string) (string, bool) {
	want := attrKey(name)
	for k, v := range t.cl.Info.Attributes {
		if attrKey(k) == want {
			return v, true
		}
	}
	return "", false
}

// matchAttribute compares with a cluster info attribute: as a lower bound, or as a
// wildcard pattern.
func (t *target) matchAttribute(a events.AttributeRequirement) string {
	label := a.From.Label(a.Name)
	have, ok := t.attribute(a.Name)
	var least string
	if a.AtLeast != nil {
		least = strconv.FormatFloat(*a.AtLeast, 'f', -1, 64)
	}
	switch {
	case !ok && a.AtLeast != nil:
		return fmt.Sprintf("%s: the job needs at least %s, the cluster does not report %s", label, least, a.Name)
	case !ok:
		return fmt.Sprintf("%s: the job asks for %s, the cluster does not report %s", label, a.Pattern, a.Name)
	case a.AtLeast != nil:
		h, err := strconv.ParseFloat(strings.TrimSpace(have), 64)
		if err != nil {
			return fmt.Sprintf("%s: the job needs at least %s, the cluster's %s is %q, not a number", label, least, a.Name, have)
		}
		if h < *a.AtLeast {
			return fmt.Sprintf("%s: the job needs at least %s, the cluster has %s", label, least, have)
		}
	case !globMatch(a.Pattern, have):
		return fmt.Sprintf("%s: the job asks for %s, the cluster has %s", label, a.Pattern, have)
	}
	return ""
}

func (t *target) matchApplication(job *events.Job) string {
	if job.Application != nil {
		a := job.Application
		app, ok := t.prof.Application(a.Name, a.Version)
		if !ok {
			return fmt.Sprintf("application: profile %s has no application %s %s", t.prof.Name, a.Name, a.Version)
		}
		if tm := t.prof.Template(app.Template); a.Variation != "" && (tm == nil || tm.Invocation(a.Variation) == nil) {
			return fmt.Sprintf("application: %s's template %s in profile %s has no variation %q", a.Name, app.Template, t.prof.Name, a.Variation)
		}
		return ""
	}
	if job.MPI || job.JobType == events.JobMPI {
		if _, ok := t.prof.Application(mpiApplication, ""); !ok {
			return fmt.Sprintf("mpi: profile %s has no %s application to start MPI jobs", t.prof.Name, mpiApplication)
		}
	}
	return ""
}
