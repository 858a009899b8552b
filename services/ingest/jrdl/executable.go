package jrdl

import (
	"net/url"
	"path"
	"strings"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/services/ingest/internal/xmltree"
)

// The spec lets an executable be a URL ("gsiftp://ip/path/file"): the program is fetched
// before the job runs. Such a job gets one more stage-in entry, from the URL to the URL's
// file name in the job's directory, and runs that file; the stager marks a staged file
// the job runs as executable.

// remoteExecutable returns the local name of an executable given as a URL, and whether
// it is one.
func remoteExecutable(exe string) (string, bool) {
	if !strings.Contains(exe, "://") {
		return "", false
	}
	u, err := url.Parse(exe)
	if err != nil || u.Scheme == "" {
		return "", false
	}
	name := path.Base(u.Path)
	if name == "." || name == "/" || name == ".." || strings.HasPrefix(name, "-") {
		return "", false
	}
	return name, true
}

// checkRemoteExecutable refuses, at its position, a URL executable with no file name.
func (d *decoder) checkRemoteExecutable(el *xmltree.Element, exe, field string) {
	if !strings.Contains(exe, "://") {
		return
	}
	if _, ok := remoteExecutable(exe); !ok {
		d.list.Addf(el.Line, el.Col, field, "%q is a URL without a file name to run (give the program's path in the URL)", exe)
	}
}

// stageExecutable adds the stage-in of a URL executable and runs the staged file.
func stageExecutable(job *events.Job) {
	name, ok := remoteExecutable(job.Executable)
	if !ok {
		return
	}
	for _, f := range job.StageIn {
		if strings.TrimPrefix(f.To, "./") == name && f.From != job.Executable {
			return // the document stages another file under this name; checked by the stager
		}
	}
	if !containsCopy(job.StageIn, job.Executable, name) {
		job.StageIn = append(job.StageIn, events.FileCopy{From: job.Executable, To: name})
	}
	job.Executable = name
}

func containsCopy(list []events.FileCopy, from, to string) bool {
	for _, f := range list {
		if f.From == from && strings.TrimPrefix(f.To, "./") == to {
			return true
		}
	}
	return false
}
