package incarnator

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/pkg/cluster"
	"github.com/gridwire/gridwire/pkg/shellquote"
)

// BuiltinPlanner is the foundation's minimum: it runs every job on the first fork
// cluster of the config and renders a JOB script by hand, every job value quoted. The
// incarnator issue replaces it with OS profiles and matching.
type BuiltinPlanner struct {
	Clusters cluster.Config
	WorkRoot string // where job directories go for clusters that name none
}

// Plan implements Planner.
func (p BuiltinPlanner) Plan(job events.Job) (events.IncarnatedData, error) {
	for _, v := range job.Environment {
		if !validEnvName(v.Name) {
			return events.IncarnatedData{}, fmt.Errorf("%w: environment variable name %q is not a shell name", ErrRejected, v.Name)
		}
	}
	var cl cluster.Cluster
	found := false
	excluded := map[string]string{}
	for _, c := range p.Clusters.Clusters {
		if c.Kind == cluster.KindFork {
			cl, found = c, true
			break
		}
		excluded[c.Name] = "only fork clusters are supported by the built-in planner"
	}
	if !found {
		return events.IncarnatedData{}, &NoMatchError{Job: job.ID, Excluded: excluded}
	}
	root := cl.WorkRoot
	if root == "" {
		root = p.WorkRoot
	}
	wd := filepath.Join(root, job.ID)
	body := renderJob(job, wd)
	sum := sha256.Sum256([]byte(body))
	return events.IncarnatedData{
		Cluster: cl.Name, LRMS: cl.LRMS, Profile: "builtin-fork", ProfileHash: "builtin",
		WorkDir: wd,
		Scripts: map[string]events.Script{events.ScriptJob: {Body: body, SHA256: hex.EncodeToString(sum[:])}},
	}, nil
}

// renderJob writes the job as a POSIX shell script. Every value from the job is quoted.
func renderJob(job events.Job, wd string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "#!/bin/sh\n# gridwire job %s\ncd %s || exit 111\n", job.ID, shellquote.Quote(wd))
	for _, v := range job.Environment {
		fmt.Fprintf(&b, "export %s=%s\n", v.Name, shellquote.Quote(v.Value))
	}
	b.WriteString(shellquote.Join(append([]string{job.Executable}, job.Arguments...)...))
	stdin := "/dev/null"
	if job.Stdin != "" {
		stdin = events.StdinFile
	}
	fmt.Fprintf(&b, " <%s >%s 2>%s\n", stdin, events.StdoutFile, events.StderrFile)
	fmt.Fprintf(&b, "echo $? >%s\n", events.ExitFile)
	return b.String()
}

func validEnvName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}
