package events

// The layout of a job's working directory on its target, shared by the incarnator (which
// renders scripts that write it), the executor (which starts jobs), the watcher (which
// reads exits) and the stager (which moves files in and out of it). Paths are relative
// to the working directory.
const (
	ControlDir = ".gridwire"             // gridwire's own files, never staged
	ScriptFile = ".gridwire/job.sh"      // the rendered JOB script
	ExitFile   = ".gridwire/exit_status" // "<code>\n", written by the job's epilogue
	// GPEExitFile is where the GPE OS profile spec has a profile's JOB_EPILOGUE write the
	// job's exit status ("<code>\n"); it is read when ExitFile is not there.
	GPEExitFile = ".gpe_exit_status"
	StartMarker = ".gridwire/native_id" // the native ID, written once START succeeded
	StdinFile   = ".gridwire/stdin"     // staged-in standard input
	StdoutFile  = ".gridwire/stdout"    // the program's standard output
	StderrFile  = ".gridwire/stderr"    // the program's standard error
)

// Script names in IncarnatedData.Scripts. JOB is what runs as the job; the others are
// the profile's templates, run by the executor and watcher on the target. Values known
// only at run time reach them as shell variables that the runner sets, quoted, before
// the script: GW_JOB_ID, GW_WORKDIR, GW_NATIVE_ID (and GW_NATIVE_IDS, space-separated,
// for a batched status call). The JOB script of a group's child also sets GW_PARENT_ID,
// the parent record's (the session's) ID.
const (
	ScriptJob   = "JOB"
	ScriptStart = "START"
	// ScriptStartComponent is a batch profile's options of one component of a
	// heterogeneous job (START_HETJOB_COMPONENT): co-allocated subjobs on one cluster
	// whose profile has it are submitted together as one job.
	ScriptStartComponent = "START_HETJOB_COMPONENT"
	ScriptAbort          = "ABORT"
	ScriptHold           = "HOLD"
	ScriptResume         = "RESUME"
	ScriptStatus         = "GET_JOB_STATUS"
	ScriptPrologue       = "JOB_PROLOGUE"
	ScriptEpilogue       = "JOB_EPILOGUE"
	ScriptDelete         = "DELETE"
	ScriptList           = "LIST"
	VarJobID             = "GW_JOB_ID"
	VarWorkDir           = "GW_WORKDIR"
	VarParentID          = "GW_PARENT_ID"
	VarNativeID          = "GW_NATIVE_ID"
	VarNativeIDList      = "GW_NATIVE_IDS"
	// VarPropertyURL and VarPropertyToken are what a DDS task that declares properties
	// is given in its environment (never on a command line): the address of the
	// gateway's task-side API as the task's host reaches it, and the task's credential.
	VarPropertyURL   = "GRIDWIRE_PROPERTY_URL"
	VarPropertyToken = "GRIDWIRE_PROPERTY_TOKEN"
)

// SchemeUpload is the URL scheme of files a submitter uploaded with the job, kept in the
// NATS object store; the stager fetches them, ingest recognises them in canonical jobs.
const SchemeUpload = "gridwire-upload"
