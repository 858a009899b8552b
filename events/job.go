package events

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/gridwire/gridwire/pkg/substitute"
)

// Job is the canonical job: what every description language is turned into, and all a
// later service needs to run it. Fields are plain data; zero values mean "not said".
// Ingest fills it; no later service changes it (their facts are events of their own).
type Job struct {
	ID     string `json:"id"`               // ULID, the job's identity in the log
	Name   string `json:"name,omitempty"`   // a human name from the description
	Kind   Kind   `json:"kind,omitempty"`   // "" for a runnable job, KindGroup for a parent record
	Parent string `json:"parent,omitempty"` // the parent record's job ID (JRDL document, DDS topology)
	// Children of a parent record, in document order: a range of consecutive IDs for
	// a parent of more than ChildListMax (ChildRange), then those listed (ChildIDs).
	Children   []string `json:"children,omitempty"`
	ChildRange *IDRange `json:"child_range,omitempty"`
	// Submitter is the principal that handed the job in.
	Submitter string `json:"submitter,omitempty"`
	// IdempotencyKey is the key the submitter gave the submission that created the job:
	// a retry with the same key returns this job instead of creating another. Kept in
	// the log, so the record of keys can always be rebuilt from it.
	IdempotencyKey string `json:"idempotency_key,omitempty"`
	// Original is the description as it was handed in (kept once, on the parent record
	// when there is one; children point at it with Parent and Original.Index).
	Original Original `json:"original"`

	Executable  string   `json:"executable,omitempty"`
	Arguments   []string `json:"arguments,omitempty"`
	Environment []EnvVar `json:"environment,omitempty"`
	Directory   string   `json:"directory,omitempty"`
	LibraryPath []string `json:"library_path,omitempty"`

	Stdin  string   `json:"stdin,omitempty"`
	Stdout []string `json:"stdout,omitempty"` // every destination of standard output
	Stderr []string `json:"stderr,omitempty"`

	Count   int     `json:"count,omitempty"`    // processors; > 1 with MPI means an MPI run
	MPI     bool    `json:"mpi,omitempty"`      // true when the job is an MPI job
	JobType JobType `json:"job_type,omitempty"` // single, mpi, xmpi, htc

	DefaultStorageBase  string     `json:"default_storage_base,omitempty"`
	MaxTransferAttempts int        `json:"max_transfer_attempts,omitempty"` // tries of each file in all (v3: its retries + 1); 0: the stager's default
	StageIn             []FileCopy `json:"stage_in,omitempty"`
	StageOut            []FileCopy `json:"stage_out,omitempty"`
	Cleanup             []string   `json:"cleanup,omitempty"`

	StartTime   *time.Time    `json:"start_time,omitempty"`   // not before
	StartBefore *time.Time    `json:"start_before,omitempty"` // give up if not started by then
	Duration    time.Duration `json:"duration,omitempty"`     // expected wall time
	// StartWithin is a start-before given as a period from submission (JRDL's
	// jobStartBefore); the submitted event's time anchors it. Kept exactly, since years
	// and months have no fixed length.
	StartWithin *Period `json:"start_within,omitempty"`
	// Walltime is the expected wall time as written (JRDL's jobDuration). Duration holds
	// the same when it has a fixed length (no years or months).
	Walltime *Period `json:"walltime,omitempty"`
	// Limits bound what the program's processes may use (POSIX resource limits, soft
	// and hard alike; JSDL's POSIX limits). The JOB script sets each with the shell's
	// ulimit before the program starts, so they hold on every target kind.
	Limits []Limit `json:"limits,omitempty"`

	// Restarts is how many times a run that crashed (ended with a non-zero exit code) is
	// run again, each run an attempt of its own (DDS's TaskCrashed → RestartTask n).
	Restarts int `json:"restarts,omitempty"`

	// Coallocation places a JRDL subjob among the subjobs that run together.
	Coallocation *Coallocation `json:"coallocation,omitempty"`

	// Substitutions names the {word} placeholders left in the job's strings for the target
	// to fill (v3: taskid, queue, lrms; JRDL: its reserved substitution names; DDS:
	// session, the parent record's ID, and dds_location, filled by the JOB script). See
	// Substitute.
	Substitutions []string `json:"substitutions,omitempty"`

	Requirements Requirements      `json:"requirements"`
	Application  *Application      `json:"application,omitempty"`
	Fields       map[string]string `json:"fields,omitempty"` // profile template fields set by the job

	DDS *DDSContext `json:"dds,omitempty"`

	// Extra holds attributes a language carries that have no field above, by their
	// language's own name, so nothing is dropped silently.
	Extra map[string]string `json:"extra,omitempty"`
}

// Limit is one resource limit on a job's program: Value in the resource's own unit.
type Limit struct {
	Resource LimitResource `json:"resource"`
	Value    int64         `json:"value"`
}

// LimitResource names a resource a job's program may be limited in.
type LimitResource string

// The resources a job may limit: every one a POSIX shell's ulimit sets, each mapped to
// its option and the unit that option counts in (LimitResource.Ulimit).
const (
	LimitCPUTime       LimitResource = "cpu_time"       // seconds
	LimitFileSize      LimitResource = "file_size"      // bytes
	LimitCoreSize      LimitResource = "core_size"      // bytes
	LimitDataSize      LimitResource = "data_size"      // bytes
	LimitLockedMemory  LimitResource = "locked_memory"  // bytes
	LimitOpenFiles     LimitResource = "open_files"     // descriptors
	LimitStackSize     LimitResource = "stack_size"     // bytes
	LimitVirtualMemory LimitResource = "virtual_memory" // bytes
)

// Ulimit is the shell's ulimit option for the resource and how many of the limit's
// units make one of the option's: 512-byte blocks for file and core sizes, as POSIX has
// -f, and KiB for the other sizes, as dash and bash (in the POSIX mode it runs as sh)
// count them. ok is false for a resource not named above.
func (r LimitResource) Ulimit() (option string, unit int64, ok bool) {
	switch r {
	case LimitCPUTime:
		return "-t", 1, true
	case LimitFileSize:
		return "-f", 512, true
	case LimitCoreSize:
		return "-c", 512, true
	case LimitDataSize:
		return "-d", 1024, true
	case LimitLockedMemory:
		return "-l", 1024, true
	case LimitOpenFiles:
		return "-n", 1, true
	case LimitStackSize:
		return "-s", 1024, true
	case LimitVirtualMemory:
		return "-v", 1024, true
	}
	return "", 0, false
}

// Kind separates runnable jobs from parent records.
type Kind string

// KindGroup is a parent record (a JRDL document or DDS topology); it never runs.
const KindGroup Kind = "group"

// JobType is the kind of run.
type JobType string

// Job types of JRDL, and MPI of the v3 description (count > 1).
const (
	JobSingle JobType = "single"
	JobMPI    JobType = "mpi"
	JobXMPI   JobType = "xmpi"
	JobHTC    JobType = "htc"
)

// EnvVar is one environment variable; order is kept as written.
type EnvVar struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// Original is the submitted description, for audit.
type Original struct {
	Format      string `json:"format,omitempty"` // v3-json, v3-yaml, jrdl, dds, jsdl, ptp-submit
	ContentType string `json:"content_type,omitempty"`
	File        string `json:"file,omitempty"`   // name as given by the submitter
	SHA256      string `json:"sha256,omitempty"` // of Bytes
	Bytes       []byte `json:"bytes,omitempty"`  // empty on children of a parent record
	Index       int    `json:"index,omitempty"`  // position of this job in its document
	// Path locates the job in its document: "job[2]/subjob[1]" for JRDL, the task path
	// for a DDS instance.
	Path string `json:"path,omitempty"`
}

// FileCopy is one file or directory to move. For stage-in, From is remote and To is a
// path in the job's working directory; for stage-out the other way round.
type FileCopy struct {
	From      string `json:"from"`
	To        string `json:"to"`
	Directory bool   `json:"directory,omitempty"` // the remote name ended in '/'
	Attempts  int    `json:"attempts,omitempty"`  // retry budget; 0 = the job's, then config's
	// When limits stage-out: "always" (default), "success", "failure".
	When string `json:"when,omitempty"`
}

// Application names a profile Application entry, and the invocation variation of its
// template the job asks for ("" is the default; the GPE OS profile spec's example is a
// debug mode).
type Application struct {
	Name      string `json:"name"`
	Version   string `json:"version,omitempty"`
	Variation string `json:"variation,omitempty"`
}

// DDSContext places a task instance in its topology. On the parent record it holds the
// topology's name and variables only.
type DDSContext struct {
	Topology string `json:"topology,omitempty"`
	// TaskPath is DDS's runtime path of the instance, e.g. main/group1/collection1_3/task2_1.
	TaskPath        string `json:"task_path,omitempty"`
	TaskID          string `json:"task_id,omitempty"`
	TaskIndex       int    `json:"task_index"`
	CollectionIndex int    `json:"collection_index"` // -1 outside a collection
	// TaskName, GroupName and CollectionName are the declared IDs of the task, its group
	// (the main group's name for tasks directly in main) and its collection, if any.
	TaskName       string `json:"task_name,omitempty"`
	GroupName      string `json:"group_name,omitempty"`
	CollectionName string `json:"collection_name,omitempty"`
	// CollectionPath is the runtime path of the collection instance, e.g. main/group1/collection1_3.
	CollectionPath string `json:"collection_path,omitempty"`
	// Exe is the exe element with %taskIndex%/%collectionIndex% resolved; Executable and
	// Arguments of the job are its words.
	Exe          string `json:"exe,omitempty"`
	ExeReachable bool   `json:"exe_reachable,omitempty"` // false: deliver the executable to the worker
	// EnvScript is run before Exe (the env element), with the same reachability rule.
	EnvScript    string        `json:"env_script,omitempty"`
	EnvReachable bool          `json:"env_reachable,omitempty"`
	Properties   []DDSProperty `json:"properties,omitempty"`
	// Requirements are the task's as DDS declares them (a collection's override the
	// task's), for the task's own context; placement reads Job.Requirements, where ingest
	// put what they ask in the gateway's terms.
	Requirements []DDSRequirement  `json:"requirements,omitempty"`
	Triggers     []DDSTrigger      `json:"triggers,omitempty"`
	Assets       []DDSAsset        `json:"assets,omitempty"`
	Vars         map[string]string `json:"vars,omitempty"`
}

// DDSProperty is a key-value property a task reads or writes.
type DDSProperty struct {
	Name   string `json:"name"`
	Access string `json:"access,omitempty"` // read, write, readwrite
	Scope  string `json:"scope,omitempty"`  // global (default) or collection
}

// DDSAsset is data DDS hands a task, here inline (visibility task or global).
type DDSAsset struct {
	Name       string `json:"name"`
	Type       string `json:"type"`
	Visibility string `json:"visibility"`
	Value      string `json:"value"`
}

// DDSRequirement is a hostname or worker-node pattern.
type DDSRequirement struct {
	Name  string `json:"name,omitempty"`
	Type  string `json:"type"` // hostname, wnname, ...
	Value string `json:"value"`
}

// DDSTrigger is a condition and what to do on it (TaskCrashed → RestartTask n).
type DDSTrigger struct {
	Name      string `json:"name,omitempty"`
	Condition string `json:"condition"`
	Action    string `json:"action"`
	Arg       string `json:"arg,omitempty"`
}

// Coallocation says which JRDL subjobs are started together and where the submitter put
// each one by hand.
type Coallocation struct {
	// Group is the index of the JRDL job (in its document, from 0) whose subjobs these are;
	// Size is how many subjobs that job has. All of a group start together or not at all.
	Group int `json:"group"`
	Size  int `json:"size"`
	// Contact is the resource manager contact the submitter chose (resourceManagerContact).
	Contact string `json:"contact,omitempty"`
	// JobManager is the local job manager type (jobManagerType: fork or pbs).
	JobManager string `json:"job_manager,omitempty"`
	// TotalCount is the processor count of the whole job (its resource count).
	TotalCount int `json:"total_count,omitempty"`
	// OnSiblingEnd is what happens to the running subjobs when one ends without
	// succeeding: SiblingsAbort ("" is the same) ends them, SiblingsContinue lets them run.
	OnSiblingEnd string `json:"on_sibling_end,omitempty"`
}

// Period is an xs:duration kept exactly: years and months have no fixed length, so they
// are held apart from days and the clock part. It encodes as its xs:duration text.
type Period struct {
	Negative bool
	Years    int64
	Months   int64
	Days     int64
	Hours    int64
	Minutes  int64
	Seconds  int64
	Nanos    int64 // fraction of a second, 0..999999999
}

// AddTo returns t moved by the period (calendar part first, then the clock part).
func (p Period) AddTo(t time.Time) time.Time {
	sign := int64(1)
	if p.Negative {
		sign = -1
	}
	t = t.AddDate(int(sign*p.Years), int(sign*p.Months), int(sign*p.Days))
	clock := time.Duration(p.Hours)*time.Hour + time.Duration(p.Minutes)*time.Minute +
		time.Duration(p.Seconds)*time.Second + time.Duration(p.Nanos)
	return t.Add(time.Duration(sign) * clock)
}

// Fixed returns the period as a time.Duration when it has a fixed length (no years or
// months; a day counts 24 hours) and fits.
func (p Period) Fixed() (time.Duration, bool) {
	if p.Years != 0 || p.Months != 0 {
		return 0, false
	}
	const maxD = int64(^uint64(0) >> 1)
	parts := []struct{ n, unit int64 }{{p.Days, int64(24 * time.Hour)}, {p.Hours, int64(time.Hour)},
		{p.Minutes, int64(time.Minute)}, {p.Seconds, int64(time.Second)}, {p.Nanos, 1}}
	var total int64
	for _, x := range parts {
		if x.n != 0 && x.n > (maxD-total)/x.unit {
			return 0, false
		}
		total += x.n * x.unit
	}
	if p.Negative {
		total = -total
	}
	return time.Duration(total), true
}

// String is the canonical xs:duration text, e.g. PT10H3M.
func (p Period) String() string {
	var b strings.Builder
	if p.Negative {
		b.WriteByte('-')
	}
	b.WriteByte('P')
	for _, x := range []struct {
		n    int64
		unit byte
	}{{p.Years, 'Y'}, {p.Months, 'M'}, {p.Days, 'D'}} {
		if x.n != 0 {
			b.WriteString(strconv.FormatInt(x.n, 10))
			b.WriteByte(x.unit)
		}
	}
	if p.Hours != 0 || p.Minutes != 0 || p.Seconds != 0 || p.Nanos != 0 {
		b.WriteByte('T')
		for _, x := range []struct {
			n    int64
			unit byte
		}{{p.Hours, 'H'}, {p.Minutes, 'M'}} {
			if x.n != 0 {
				b.WriteString(strconv.FormatInt(x.n, 10))
				b.WriteByte(x.unit)
			}
		}
		if p.Seconds != 0 || p.Nanos != 0 {
			b.WriteString(strconv.FormatInt(p.Seconds, 10))
			if p.Nanos != 0 {
				b.WriteString(strings.TrimRight(fmt.Sprintf(".%09d", p.Nanos), "0"))
			}
			b.WriteByte('S')
		}
	}
	if b.Len() == 1 || b.Len() == 2 && p.Negative {
		b.WriteString("T0S")
	}
	return b.String()
}

// MarshalText encodes the period as xs:duration text.
func (p Period) MarshalText() ([]byte, error) { return []byte(p.String()), nil }

// UnmarshalText reads xs:duration text.
func (p *Period) UnmarshalText(b []byte) error {
	q, err := ParsePeriod(string(b))
	if err != nil {
		return err
	}
	*p = q
	return nil
}

// ParsePeriod reads an xs:duration: an optional '-', 'P', then nY nM nD, then optionally
// 'T' and nH nM n[.f]S, in that order, at least one part, and no 'T' without a time part.
func ParsePeriod(s string) (Period, error) {
	var p Period
	bad := func(why string) (Period, error) {
		return Period{}, fmt.Errorf("%q is not an xs:duration (PnYnMnDTnHnMnS): %s", s, why)
	}
	rest := s
	if strings.HasPrefix(rest, "-") {
		p.Negative, rest = true, rest[1:]
	}
	if !strings.HasPrefix(rest, "P") {
		return bad("it must start with P")
	}
	rest = rest[1:]
	date, clock, hasT := strings.Cut(rest, "T")
	if hasT && clock == "" {
		return bad("T must be followed by hours, minutes or seconds")
	}
	if date == "" && !hasT {
		return bad("it has no part")
	}
	if err := periodParts(date, "YMD", []*int64{&p.Years, &p.Months, &p.Days}, nil); err != nil {
		return bad(err.Error())
	}
	if err := periodParts(clock, "HMS", []*int64{&p.Hours, &p.Minutes, &p.Seconds}, &p.Nanos); err != nil {
		return bad(err.Error())
	}
	return p, nil
}

// periodParts reads "nXnYnZ" with units in the order given; only the last unit of the
// clock part (seconds) may have a fraction, stored in nanos.
func periodParts(s, units string, dst []*int64, nanos *int64) error {
	next := 0
	for s != "" {
		i := 0
		for i < len(s) && (s[i] >= '0' && s[i] <= '9' || s[i] == '.') {
			i++
		}
		if i == 0 || i == len(s) {
			return fmt.Errorf("expected a number followed by one of %s", units)
		}
		u := strings.IndexByte(units[next:], s[i])
		if u < 0 {
			return fmt.Errorf("unexpected %q (units go in the order %s, each at most once)", s[i], units)
		}
		u += next
		whole, frac, hasFrac := strings.Cut(s[:i], ".")
		if hasFrac && (nanos == nil || units[u] != 'S' || frac == "" || strings.Contains(frac, ".")) {
			return fmt.Errorf("only seconds may have a fraction")
		}
		if whole == "" {
			return fmt.Errorf("a number must have digits before its point")
		}
		n, err := strconv.ParseInt(whole, 10, 64)
		if err != nil {
			return fmt.Errorf("%s is out of range", whole)
		}
		*dst[u] = n
		if hasFrac {
			*nanos = fractionNanos(frac)
		}
		next, s = u+1, s[i+1:]
	}
	return nil
}

// fractionNanos reads decimal digits after a point as nanoseconds (beyond nine digits
// truncated).
func fractionNanos(frac string) int64 {
	var n int64
	for i := 0; i < 9; i++ {
		n *= 10
		if i < len(frac) {
			n += int64(frac[i] - '0')
		}
	}
	return n
}

// Substitute returns a copy of the job with the placeholders it names in Substitutions
// filled from vars, in every field the description languages substitute: executable,
// arguments, environment values, directory, library path, stdio, default storage base,
// both ends of staged files and the cleanup list. Names the job does not list are left
// alone, so text that merely looks like a placeholder stays as written.
func (j Job) Substitute(vars map[string]string) Job {
	use := make(map[string]string, len(j.Substitutions))
	for _, name := range j.Substitutions {
		if v, ok := vars[name]; ok {
			use[name] = v
		}
	}
	if len(use) == 0 {
		return j
	}
	sub := func(s string) string { return substitute.Substitute(s, use) }
	subAll := func(list []string) []string {
		if list == nil {
			return nil
		}
		out := make([]string, len(list))
		for i, s := range list {
			out[i] = sub(s)
		}
		return out
	}
	j.Executable, j.Directory, j.Stdin = sub(j.Executable), sub(j.Directory), sub(j.Stdin)
	j.DefaultStorageBase = sub(j.DefaultStorageBase)
	j.Arguments, j.LibraryPath, j.Cleanup = subAll(j.Arguments), subAll(j.LibraryPath), subAll(j.Cleanup)
	j.Stdout, j.Stderr = subAll(j.Stdout), subAll(j.Stderr)
	if j.Environment != nil {
		env := make([]EnvVar, len(j.Environment))
		for i, e := range j.Environment {
			env[i] = EnvVar{Name: e.Name, Value: sub(e.Value)}
		}
		j.Environment = env
	}
	j.StageIn, j.StageOut = substituteCopies(j.StageIn, sub), substituteCopies(j.StageOut, sub)
	return j
}

func substituteCopies(list []FileCopy, sub func(string) string) []FileCopy {
	if list == nil {
		return nil
	}
	out := make([]FileCopy, len(list))
	for i, c := range list {
		c.From, c.To = sub(c.From), sub(c.To)
		out[i] = c
	}
	return out
}
