package events

import "time"

// Job is the canonical job: what every description language is turned into, and all a
// later service needs to run it. Fields are plain data; zero values mean "not said".
// Ingest fills it; no later service changes it (their facts are events of their own).
type Job struct {
	ID     string `json:"id"`               // ULID, the job's identity in the log
	Name   string `json:"name,omitempty"`   // a human name from the description
	Kind   Kind   `json:"kind,omitempty"`   // "" for a runnable job, KindGroup for a parent record
	Parent string `json:"parent,omitempty"` // the parent record's job ID (JRDL document, DDS topology)
	// Children of a parent record, in document order.
	Children []string `json:"children,omitempty"`
	// Submitter is the principal that handed the job in.
	Submitter string `json:"submitter,omitempty"`
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
	MaxTransferAttempts int        `json:"max_transfer_attempts,omitempty"`
	StageIn             []FileCopy `json:"stage_in,omitempty"`
	StageOut            []FileCopy `json:"stage_out,omitempty"`
	Cleanup             []string   `json:"cleanup,omitempty"`

	StartTime   *time.Time    `json:"start_time,omitempty"`   // not before
	StartBefore *time.Time    `json:"start_before,omitempty"` // give up if not started by then
	Duration    time.Duration `json:"duration,omitempty"`     // expected wall time

	Requirements Requirements      `json:"requirements"`
	Application  *Application      `json:"application,omitempty"`
	Fields       map[string]string `json:"fields,omitempty"` // profile template fields set by the job

	DDS *DDSContext `json:"dds,omitempty"`

	// Extra holds attributes a language carries that have no field above, by their
	// language's own name, so nothing is dropped silently.
	Extra map[string]string `json:"extra,omitempty"`
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
	Format      string `json:"format,omitempty"` // v3-json, v3-yaml, jrdl, dds
	ContentType string `json:"content_type,omitempty"`
	File        string `json:"file,omitempty"`   // name as given by the submitter
	SHA256      string `json:"sha256,omitempty"` // of Bytes
	Bytes       []byte `json:"bytes,omitempty"`  // empty on children of a parent record
	Index       int    `json:"index,omitempty"`  // position of this job in its document
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

// Requirements constrain where a job may run. Empty means anywhere.
type Requirements struct {
	Hosts             []string             `json:"hosts,omitempty"`
	LRMS              string               `json:"lrms,omitempty"`
	Fork              *bool                `json:"fork,omitempty"`
	Queue             string               `json:"queue,omitempty"`
	OSName            string               `json:"os_name,omitempty"` // may hold * and ?
	OSRelease         string               `json:"os_release,omitempty"`
	OSVersion         string               `json:"os_version,omitempty"`
	Platform          string               `json:"platform,omitempty"`
	CPUInstructionSet string               `json:"cpu_instruction_set,omitempty"`
	SMPSize           int64                `json:"smp_size,omitempty"`     // lower bound
	RAMSize           int64                `json:"ram_size,omitempty"`     // bytes, lower bound
	VirtualSize       int64                `json:"virtual_size,omitempty"` // bytes, lower bound
	CPUHz             int64                `json:"cpu_hz,omitempty"`       // lower bound
	Software          []SoftwareConstraint `json:"software,omitempty"`
	// Resources holds further numeric or textual resource attributes (JRDL's), by name.
	Resources map[string]string `json:"resources,omitempty"`
}

// SoftwareConstraint is "name" or "name OP version".
type SoftwareConstraint struct {
	Name    string `json:"name"`
	Op      string `json:"op,omitempty"` // <, <=, ==, >, >=
	Version string `json:"version,omitempty"`
}

// Application names a profile Application entry.
type Application struct {
	Name    string `json:"name"`
	Version string `json:"version,omitempty"`
}

// DDSContext places a task instance in its topology.
type DDSContext struct {
	Topology        string            `json:"topology,omitempty"`
	TaskPath        string            `json:"task_path,omitempty"`
	TaskID          string            `json:"task_id,omitempty"`
	TaskIndex       int               `json:"task_index"`
	CollectionIndex int               `json:"collection_index"`
	Properties      []DDSProperty     `json:"properties,omitempty"`
	Requirements    []DDSRequirement  `json:"requirements,omitempty"`
	Triggers        []DDSTrigger      `json:"triggers,omitempty"`
	Vars            map[string]string `json:"vars,omitempty"`
}

// DDSProperty is a key-value property a task reads or writes.
type DDSProperty struct {
	Name   string `json:"name"`
	Access string `json:"access,omitempty"` // read, write, readwrite
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
