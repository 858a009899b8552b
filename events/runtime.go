package events

// Run-time substitution names: placeholders ({NAME}) that only the target can fill, such
// as the account's home or the host's OS. Each description language maps its own
// reserved names onto these (JRDL's Table 1, DDS's installation directory); ingest
// leaves them in the job's words and lists them in Job.Substitutions, and the JOB script
// fills them on the target when the job runs.

// RuntimeValues maps each run-time name to the POSIX shell expression that yields its
// value on the target.
var RuntimeValues = map[string]string{
	"HOME":                     `${HOME:-$(cd && pwd)}`,
	"LOGNAME":                  `${LOGNAME:-$(id -un)}`,
	"JOBID":                    `$` + VarJobID,
	"GLOBUS_LOCATION":          `${GLOBUS_LOCATION-}`,
	"X509_CERT_DIR":            `${X509_CERT_DIR:-/etc/grid-security/certificates}`,
	"GLOBUS_HOST_CPUTYPE":      `$(uname -m)`,
	"GLOBUS_HOST_MANUFACTURER": `unknown`,
	"GLOBUS_HOST_OSNAME":       `$(uname -s)`,
	"GLOBUS_HOST_OSVERSION":    `$(uname -r)`,
	// The session a job runs in: its parent record's ID (a DDS topology's session, a
	// JRDL document), which the JOB script sets for every child.
	"session": `$` + VarParentID,
	// A DDS task's DDS_LOCATION: DDS's installation on the worker. gridwire installs
	// none, so the account's own DDS_LOCATION if it has one, else the job's directory.
	"dds_location": `${DDS_LOCATION:-$` + VarWorkDir + `}`,
}

// RuntimeContact is the run-time name of the resource manager contact, which the
// incarnator knows at placement: the contact the job named, else the cluster's.
const RuntimeContact = "GLOBUS_RMS_JOB_CONTACT"

// RuntimeRefused are names a description may use that no gridwire target can fill
// truthfully, with the reason a job that uses one is refused.
var RuntimeRefused = map[string]string{
	"GLOBUSRUN_GASS_URL": "gridwire runs no GASS server (its stager moves the job's files)",
	"CUR_DIRL":           "the directory the client was started in is not sent with the job",
	"CUR_DIR":            "the directory the client was started in is not sent with the job",
}
