package executor

import (
	"context"
	"fmt"
	"net"
	"os"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/pkg/sshx"
)

// Properties is how the executor hands a DDS task that declares properties the way to
// the gateway's task-side property API: its address as the task's host reaches it and
// the task's own credential, both in the task's environment (events.VarPropertyURL,
// events.VarPropertyToken), never on a command line and never in the log.
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
