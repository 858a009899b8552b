package incarnator

import (
	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/pkg/envfile"
)

// The property API's file (envfile.PropertyFile): a batch system does not reliably hand
// the submitting environment to the job (PBS's qsub without -V does not; sbatch does
// unless the site or the profile says --export=NONE), so on a batch target the executor
// leaves a DDS task's property address and credential in a private file beside the job
// instead, and the JOB script of every task with properties reads it when it starts on
// its node, before the program. The script names the file, never its content: the
// credential is not in the rendered script, and so not in the log. Elsewhere (fork, a
// host over SSH) the file is not there and the variables come in the environment.

// propertyPath is the file as a shell word of the JOB script.
const propertyPath = `"$` + events.VarWorkDir + `"/` + envfile.PropertyFile

// loadProperties reads the file into the environment, for a task with properties.
func loadProperties(b []byte, job *events.Job) []byte {
	if !job.HasProperties() {
		return b
	}
	return append(b, envfile.Load(propertyPath, events.VarPropertyURL, events.VarPropertyToken)...)
}

// dropProperties removes the file once the program has ended: its credential is spent
// then (the API refuses an ended task's), and nothing else needs it. A job that a batch
// system runs again after a node's failure never got here, and still finds it.
func dropProperties(b []byte, job *events.Job) []byte {
	if !job.HasProperties() {
		return b
	}
	return append(b, "[ ! -f "+propertyPath+" ] || rm -f -- "+propertyPath+"\n"...)
}
