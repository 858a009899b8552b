package executor

import (
	"context"
	"fmt"
	"net"
	"os"
	"strings"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/pkg/envfile"
	"github.com/gridwire/gridwire/pkg/sshx"
)

// Properties is how the executor hands a DDS task that declares properties the way to
// the gateway's task-side property API: its address as the task's host reaches it and
// the task's own credential (events.VarPropertyURL, events.VarPropertyToken), never on a
// command line, in a rendered script or in the log. A task that runs where it is
// started (fork, a host over SSH) finds them in its environment. A task a batch system
// runs finds them in a private file beside it (envfile.PropertyFile, see batchEnv),
// which its JOB script reads on the node: a batch system's submit command may drop the
// submitting environment (qsub without -V) or keep it where others read it (qsub -V,
// -v: the job's attributes in qstat -f).
type Properties struct {
	// Addr is the gateway's HTTP listener on this machine (host:port). Tasks on this
	// host reach it directly (at loopback when it listens on every address); tasks on
	// SSH hosts through a remote forward of the executor's own connection to their
	// host, so nothing beyond loopback has to listen.
	Addr string
	// Credential issues a task's credential.
	Credential func(jobID string) string
}

// forwarder is a Shell on another host that carries connections made there back here
// (target.SSH: a remote forward of its connection); it returns the address on that host.
type forwarder interface {
	Forward(ctx context.Context, dial sshx.Dialer) (string, error)
}

// env is what a task is given to reach the property API through sh, nil for a job that
// has no properties (or an executor without the API). batch says a batch system started
// from this host runs the task, maybe on another node: it is given the listener's own
// address (this host's name when the listener takes every address), which other nodes
// reach when the gateway listens beyond loopback.
func (p *Properties) env(ctx context.Context, st events.State, sh Shell, batch bool) ([]events.EnvVar, error) {
	if p == nil || p.Addr == "" || !st.Job.HasProperties() {
		return nil, nil
	}
	addr := p.local()
	if batch {
		addr = p.network()
	}
	if fw, ok := sh.(forwarder); ok {
		var err error
		if addr, err = fw.Forward(ctx, p.dial); err != nil {
			return nil, fmt.Errorf("the property API for job %s on %s: %w", st.JobID, sh.Host(), err)
		}
	}
	return []events.EnvVar{{Name: events.VarPropertyURL, Value: "http://" + addr},
		{Name: events.VarPropertyToken, Value: p.Credential(st.JobID)}}, nil
}

// batchEnv moves a batch job's property variables out of START's environment into the
// content of the file the job's JOB script reads when it starts on its node
// (envfile.PropertyFile; the start script writes it, mode 0600, before START): the
// submit command never sees the credential, so the batch system neither drops it nor
// keeps it in the job's attributes. A JOB script that does not read the file (rendered
// by an incarnator before it did, and recorded so) keeps the variables in START's
// environment, as then.
func batchEnv(env []events.EnvVar, jobBody string) (file string, rest []events.EnvVar, err error) {
	if len(env) == 0 || !strings.Contains(jobBody, envfile.PropertyFile) {
		return "", env, nil
	}
	vars := make([]envfile.Var, len(env))
	for i, v := range env {
		vars[i] = envfile.Var{Name: v.Name, Value: v.Value}
	}
	if file, err = envfile.Encode(vars); err != nil {
		return "", nil, err
	}
	return file, nil, nil
}

// local is Addr as a program on this host dials it: loopback for an unspecified host.
func (p *Properties) local() string {
	host, port, err := net.SplitHostPort(p.Addr)
	if err != nil {
		return p.Addr
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		if ip != nil && ip.To4() == nil {
			return net.JoinHostPort("::1", port)
		}
		return net.JoinHostPort("127.0.0.1", port)
	}
	return p.Addr
}

// network is Addr as another machine dials it: this host's name for an unspecified host.
func (p *Properties) network() string {
	host, port, err := net.SplitHostPort(p.Addr)
	if err != nil {
		return p.Addr
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		if name, err := os.Hostname(); err == nil {
			return net.JoinHostPort(name, port)
		}
	}
	return p.Addr
}

func (p *Properties) dial(ctx context.Context) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, "tcp", p.local())
}

// withProperties gives a target built by NewTarget the property API.
func withProperties(t Target, p *Properties) {
	switch t := t.(type) {
	case *ForkTarget:
		t.Properties = p
	case *ScriptTarget:
		t.Properties = p
	}
}
