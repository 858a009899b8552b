package incarnator

import (
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"strings"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/pkg/cluster"
)

// exclusions returns every requirement of the job the target does not meet, each as a
// short reason naming the requirement; none means the target can run the job.
func (t *target) exclusions(job *events.Job) []string {
	var why []string
	add := func(s string) {
		if s != "" {
			why = append(why, s)
		}
	}
	r := &job.Requirements
	add(t.matchHosts(r.Hosts))
	add(t.matchLRMS(job))
	add(t.matchQueue(r.Queue))
	info := &t.cl.Info
	add(matchGlob("os_name", r.OSName, info.OSName))
	add(matchGlob("os_release", r.OSRelease, info.OSRelease))
	add(matchGlob("os_version", r.OSVersion, info.OSVersion))
	add(matchGlob("platform", r.Platform, info.Platform))
	add(matchGlob("cpu_instruction_set", r.CPUInstructionSet, info.CPUInstructionSet))
	add(atLeast("smp_size", r.SMPSize, info.SMPSize))
	add(atLeast("ram_size", r.RAMSize, info.RAMSize))
	add(atLeast("virtual_size", r.VirtualSize, info.VirtualSize))
	add(atLeast("cpu_hz", r.CPUHz, info.CPUHz))
	for _, sc := range r.Software {
		add(matchSoftware(sc, info.Software))
	}
	for _, k := range sortedNames(r.Resources) {
		add(t.matchResource(k, r.Resources[k]))
	}
	if job.DDS != nil {
		for _, dr := range job.DDS.Requirements {
			add(t.matchDDS(dr))
		}
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

func (t *target) matchHosts(want []string) string {
	if len(want) == 0 {
		return ""
	}
	for _, w := range want {
		for _, h := range t.hostNames() {
			if globMatch(w, h) {
				return ""
			}
		}
	}
	return fmt.Sprintf("hostname: none of %s is a host of this cluster (%s)", strings.Join(want, ", "), strings.Join(t.hostNames(), ", "))
}

func isFork(lrms string) bool { return strings.EqualFold(lrms, "fork") }

// matchLRMS applies the LRMS requirement and the v3 fork rule: a Fork target is chosen
// only when the job names Fork in lrms or sets fork: true. The rule belongs to the v3
// task description; jobs from other languages are held to it only when they set fork
// to false. It is a rule for choosing between LRMSs, so a gateway whose clusters are
// all Fork (the default config's one "local" cluster) has nothing to choose and runs
// v3 jobs there unless they set fork: false.
func (t *target) matchLRMS(job *events.Job) string {
	r := &job.Requirements
	if r.LRMS != "" && !strings.EqualFold(r.LRMS, t.cl.LRMS) {
		return fmt.Sprintf("lrms: the job asks for %s, the cluster runs %s", r.LRMS, t.cl.LRMS)
	}
	if !isFork(t.cl.LRMS) || isFork(r.LRMS) {
		return ""
	}
	if r.Fork != nil && !*r.Fork {
		return "fork: the job sets fork: false and this cluster's LRMS is Fork"
	}
	if r.Fork == nil && strings.HasPrefix(job.Original.Format, "v3") && !t.forkOnly {
		return "fork: the LRMS is Fork, which a v3 job uses only when it names Fork in lrms or sets fork: true"
	}
	return ""
}

func (t *target) matchQueue(q string) string {
	if q == "" {
		return ""
	}
	for _, have := range t.cl.Queues {
		if have == q {
			return ""
		}
	}
	if len(t.cl.Queues) == 0 {
		return fmt.Sprintf("queue: the job asks for queue %s, the cluster has no queues", q)
	}
	return fmt.Sprintf("queue: the job asks for queue %s, the cluster has %s", q, strings.Join(t.cl.Queues, ", "))
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

// matchGlob matches a requested pattern (with * and ?) against the target's value,
// ignoring case.
func matchGlob(name, want, have string) string {
	if want == "" {
		return ""
	}
	if have == "" {
		return fmt.Sprintf("%s: the job asks for %s, the cluster does not report its %s", name, want, name)
	}
	if !globMatch(want, have) {
		return fmt.Sprintf("%s: the job asks for %s, the cluster has %s", name, want, have)
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

func atLeast(name string, want, have int64) string {
	if want <= 0 {
		return ""
	}
	if have <= 0 {
		return fmt.Sprintf("%s: the job needs at least %d, the cluster does not report its %s", name, want, name)
	}
	if have < want {
		return fmt.Sprintf("%s: the job needs at least %d, the cluster has %d", name, want, have)
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
	want := sc.Name
	if sc.Op != "" {
		want += " " + sc.Op + " " + sc.Version
	}
	if len(versions) == 0 {
		return fmt.Sprintf("software: the job needs %s, which the cluster does not have", want)
	}
	return fmt.Sprintf("software: the job needs %s, the cluster has %s %s", want, sc.Name, strings.Join(versions, ", "))
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

// compareVersions orders versions piece by piece: runs of digits compare as numbers,
// runs of letters as text, separators only separate; when one runs out first, it is the
// lower ("6" < "6.0.1") unless what follows is a letter tag ("1.0rc1" < "1.0").
func compareVersions(a, b string) int {
	pa, pb := versionPieces(a), versionPieces(b)
	for i := 0; i < len(pa) && i < len(pb); i++ {
		if c := comparePiece(pa[i], pb[i]); c != 0 {
			return c
		}
	}
	switch {
	case len(pa) < len(pb):
		return -tail(pb[len(pa)])
	case len(pa) > len(pb):
		return tail(pa[len(pb)])
	}
	return 0
}

// tail orders a version that goes on past another's end: more numbers make it later
// (6.0 > 6), a letter tag earlier (1.0rc1 < 1.0).
func tail(next string) int {
	if next[0] >= '0' && next[0] <= '9' {
		return 1
	}
	return -1
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

// jrdlAttributes maps JRDL resource attribute names (lower case, no separators) onto
// the names of cluster info attributes they are compared with.
var jrdlAttributes = map[string]string{
	"minramavailable":     "ram_available",
	"minstorageavailable": "storage_available",
	"minfreecpu":          "free_cpu",
	"last1min":            "availability_1min",
	"last5min":            "availability_5min",
	"last15min":           "availability_15min",
	"schedulingplugin":    "scheduling_plugin",
}

// normKey reduces an attribute name to lower-case letters and digits of its last path
// element: "minMainMemory/minRAMSize", "min_ram_size" and "minRAMSize" are one name.
func normKey(k string) string {
	if i := strings.LastIndexAny(k, "/."); i >= 0 {
		k = k[i+1:]
	}
	var b strings.Builder
	for _, c := range strings.ToLower(k) {
		if c >= 'a' && c <= 'z' || c >= '0' && c <= '9' {
			b.WriteRune(c)
		}
	}
	return b.String()
}

// matchResource matches one JRDL resource attribute.
func (t *target) matchResource(key, val string) string {
	info := &t.cl.Info
	switch normKey(key) {
	case "count":
		return t.matchCount(key, val)
	case "operatingsystem", "name", "osname":
		return matchGlob(key, val, info.OSName)
	case "clockspeed": // MHz
		return atLeastText(key, val, info.CPUHz, 1e6, "MHz")
	case "minramsize": // MB
		return atLeastText(key, val, info.RAMSize, 1, "MB")
	case "jobmanagertype":
		if !strings.EqualFold(val, t.cl.LRMS) {
			return fmt.Sprintf("%s: the job asks for %s, the cluster runs %s", key, val, t.cl.LRMS)
		}
		return ""
	case "schedulingtype":
		return t.matchSchedulingType(key, val)
	case "resourcemanagercontact":
		return t.matchContact(key, val)
	}
	name := jrdlAttributes[normKey(key)]
	if name == "" {
		name = key
	}
	return t.matchAttribute(key, name, val)
}

func atLeastText(key, val string, have int64, unit float64, unitName string) string {
	n, err := strconv.ParseFloat(strings.TrimSpace(val), 64)
	if err != nil {
		return fmt.Sprintf("%s: %q is not a number", key, val)
	}
	if have <= 0 {
		return fmt.Sprintf("%s: the job needs at least %s %s, the cluster does not report it", key, val, unitName)
	}
	if float64(have) < n*unit {
		return fmt.Sprintf("%s: the job needs at least %s %s, the cluster has %g", key, val, unitName, float64(have)/unit)
	}
	return ""
}

// matchCount compares a processor count with the cluster's "cpus" attribute, or its SMP
// size times its hosts; a batch cluster that reports neither is not excluded, since its
// size is the LRMS's business.
func (t *target) matchCount(key, val string) string {
	n, err := strconv.ParseInt(strings.TrimSpace(val), 10, 64)
	if err != nil {
		return fmt.Sprintf("%s: %q is not an integer", key, val)
	}
	have := int64(0)
	if v, ok := t.attribute("cpus"); ok {
		have, _ = strconv.ParseInt(v, 10, 64)
	} else if t.cl.Info.SMPSize > 0 {
		have = t.cl.Info.SMPSize * int64(max(1, len(t.cl.Hosts)))
	}
	if have > 0 && have < n {
		return fmt.Sprintf("%s: the job needs %d processors, the cluster has %d", key, n, have)
	}
	return ""
}

func (t *target) matchSchedulingType(key, val string) string {
	switch strings.ToLower(val) {
	case "fork":
		if !isFork(t.cl.LRMS) {
			return fmt.Sprintf("%s: the job asks for fork, the cluster runs %s", key, t.cl.LRMS)
		}
	case "scheduler":
		if isFork(t.cl.LRMS) {
			return fmt.Sprintf("%s: the job asks for a scheduler, the cluster runs Fork", key)
		}
	default:
		return fmt.Sprintf("%s: %q is neither fork nor scheduler", key, val)
	}
	return ""
}

func (t *target) matchContact(key, val string) string {
	host := val
	if u, err := url.Parse(val); err == nil && u.Host != "" {
		host = u.Hostname()
	}
	for _, h := range t.hostNames() {
		if strings.EqualFold(h, host) {
			return ""
		}
	}
	return fmt.Sprintf("%s: %s is not a host of this cluster (%s)", key, host, strings.Join(t.hostNames(), ", "))
}

func (t *target) attribute(name string) (string, bool) {
	want := normKey(name)
	for k, v := range t.cl.Info.Attributes {
		if normKey(k) == want {
			return v, true
		}
	}
	return "", false
}

// matchAttribute compares with a cluster info attribute: as a lower bound when both are
// numbers, else as a wildcard pattern.
func (t *target) matchAttribute(key, name, val string) string {
	have, ok := t.attribute(name)
	if !ok {
		return fmt.Sprintf("%s: the job asks for %s, the cluster does not report %s", key, val, name)
	}
	w, err1 := strconv.ParseFloat(strings.TrimSpace(val), 64)
	h, err2 := strconv.ParseFloat(strings.TrimSpace(have), 64)
	if err1 == nil && err2 == nil {
		if h < w {
			return fmt.Sprintf("%s: the job needs at least %s, the cluster has %s", key, val, have)
		}
		return ""
	}
	if !globMatch(val, have) {
		return fmt.Sprintf("%s: the job asks for %s, the cluster has %s", key, val, have)
	}
	return ""
}

// matchDDS matches a DDS requirement: hostname against the cluster's hosts, wnname
// against its name (the worker-node name of DDS's SSH plug-in), each value either the
// full name or a regular expression for all of it. DDS's own example writes "+.gsi.de"
// for "anything ending in .gsi.de"; a pattern that starts with a bare '+' is read as ".+".
func (t *target) matchDDS(r events.DDSRequirement) string {
	var names []string
	switch strings.ToLower(r.Type) {
	case "hostname":
		names = t.hostNames()
	case "wnname":
		names = []string{t.cl.Name}
	case "gpu", "gpus":
		return t.matchAttribute("dds "+r.Type, "gpus", r.Value)
	case "maxinstances", "maxinstancespernode":
		return "" // how many run on one host is the executor's to enforce, not a match
	default:
		return fmt.Sprintf("dds requirement %s: type %q is not supported", r.Name, r.Type)
	}
	re, err := ddsPattern(r.Value)
	for _, n := range names {
		if strings.EqualFold(n, r.Value) || err == nil && re.MatchString(n) {
			return ""
		}
	}
	if err != nil {
		return fmt.Sprintf("dds requirement %s: %s %q matches no name here and is not a valid pattern: %v", r.Name, r.Type, r.Value, err)
	}
	return fmt.Sprintf("dds requirement %s: %s %q matches none of %s", r.Name, r.Type, r.Value, strings.Join(names, ", "))
}

func ddsPattern(v string) (*regexp.Regexp, error) {
	if strings.HasPrefix(v, "+") {
		v = "." + v
	}
	return regexp.Compile(`^(?:` + v + `)$`)
}

func (t *target) matchApplication(job *events.Job) string {
	if job.Application != nil {
		if _, ok := t.prof.Application(job.Application.Name, job.Application.Version); !ok {
			return fmt.Sprintf("application: profile %s has no application %s %s", t.prof.Name, job.Application.Name, job.Application.Version)
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
