package stager

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"syscall"
)

// HTTPPolicy says which hosts http(s) transfers may reach. Deny wins over Allow. The
// defaults deny link-local addresses and cloud metadata endpoints, checked on the
// address a name resolves to, on every connection, including those of redirects.
type HTTPPolicy struct {
	// Allow, when not empty, is the only hosts and networks reachable: host names
	// (exact, or ".example.org" for a domain and its subdomains), IPs and CIDRs.
	Allow []string `yaml:"allow,omitempty"`
	// Deny adds hosts and networks to the default deny list.
	Deny []string `yaml:"deny,omitempty"`
	// KeepMetadata turns the default deny list off (for a site whose storage really is
	// link-local). Almost never right.
	KeepMetadata bool `yaml:"allow_metadata,omitempty"`
	// CAFile holds PEM certificates trusted for https besides the system's (a site's
	// own storage CA).
	CAFile string `yaml:"ca_file,omitempty"`
}

// defaultDeny is what HTTPPolicy denies unless KeepMetadata is set: link-local
// networks (where every cloud's instance metadata service lives), AWS's IPv6 metadata
// address, and GCP's metadata host name.
var defaultDeny = []string{"169.254.0.0/16", "fe80::/10", "fd00:ec2::254/128", "metadata.google.internal", "metadata"}

// DefaultDeny returns the default deny list.
func DefaultDeny() []string { return append([]string(nil), defaultDeny...) }

// ErrPolicy refuses a host the HTTP policy does not let transfers reach.
var ErrPolicy = errors.New("stager: host refused by the transfer policy")

// hostPolicy is an HTTPPolicy parsed once.
type hostPolicy struct {
	allowNames, denyNames []string
	allowNets, denyNets   []netip.Prefix
}

func (p HTTPPolicy) compile() (hostPolicy, error) {
	var hp hostPolicy
	if !p.KeepMetadata {
		for _, s := range defaultDeny {
			_ = hp.add(s, &hp.denyNames, &hp.denyNets)
		}
	}
	var errs []error
	for i, s := range p.Allow {
		if err := hp.add(s, &hp.allowNames, &hp.allowNets); err != nil {
			errs = append(errs, fmt.Errorf("http.allow[%d]: %w", i, err))
		}
	}
	for i, s := range p.Deny {
		if err := hp.add(s, &hp.denyNames, &hp.denyNets); err != nil {
			errs = append(errs, fmt.Errorf("http.deny[%d]: %w", i, err))
		}
	}
	return hp, errors.Join(errs...)
}

func (hostPolicy) add(s string, names *[]string, nets *[]netip.Prefix) error {
	s = strings.ToLower(strings.TrimSpace(s))
	if s == "" {
		return errors.New("empty entry")
	}
	if pfx, err := netip.ParsePrefix(s); err == nil {
		*nets = append(*nets, pfx.Masked())
		return nil
	}
	if a, err := netip.ParseAddr(s); err == nil {
		*nets = append(*nets, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
		return nil
	}
	if strings.ContainsAny(s, "/:") {
		return fmt.Errorf("%q is neither a host name, an IP nor a CIDR", s)
	}
	*names = append(*names, strings.TrimSuffix(s, "."))
	return nil
}

// checkName applies the name rules to a URL's host before anything is resolved.
func (hp hostPolicy) checkName(host string) error {
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if a, err := netip.ParseAddr(host); err == nil {
		return hp.checkAddr(host, a)
	}
	if matchName(hp.denyNames, host) {
		return fmt.Errorf("%w: %s is denied", ErrPolicy, host)
	}
	// With only names allowed, a name not among them cannot be allowed by its address.
	if len(hp.allowNames) > 0 && len(hp.allowNets) == 0 && !matchName(hp.allowNames, host) {
		return fmt.Errorf("%w: %s is not in the allow list", ErrPolicy, host)
	}
	return nil
}

// checkAddr applies the network rules to an address a host resolved to.
func (hp hostPolicy) checkAddr(host string, a netip.Addr) error {
	a = a.Unmap()
	for _, n := range hp.denyNets {
		if n.Contains(a) {
			return fmt.Errorf("%w: %s (%s) is in denied network %s", ErrPolicy, host, a, n)
		}
	}
	if len(hp.allowNames)+len(hp.allowNets) == 0 || matchName(hp.allowNames, host) {
		return nil
	}
	for _, n := range hp.allowNets {
		if n.Contains(a) {
			return nil
		}
	}
	return fmt.Errorf("%w: %s (%s) is not in the allow list", ErrPolicy, host, a)
}

func matchName(list []string, host string) bool {
	for _, n := range list {
		if host == n || strings.HasPrefix(n, ".") && (strings.HasSuffix(host, n) || host == n[1:]) {
			return true
		}
	}
	return false
}

// dialControl checks every address the dialer is about to connect to. It runs after
// resolution, so a name that resolves to a denied address is refused whatever it is
// called, and again on every redirect's connection.
func (hp hostPolicy) dialControl(ctx context.Context, host string) func(network, address string, c syscall.RawConn) error {
	return func(network, address string, _ syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(address)
		if err != nil {
			return fmt.Errorf("%w: cannot parse dialled address %q", ErrPolicy, address)
		}
		return hp.checkAddr(host, ap.Addr())
	}
}

// dialer returns a DialContext for an http.Transport that enforces the policy.
func (hp hostPolicy) dialer(base *net.Dialer) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		if err := hp.checkName(host); err != nil {
			return nil, err
		}
		d := *base
		d.ControlContext = func(ctx context.Context, network, address string, c syscall.RawConn) error {
			return hp.dialControl(ctx, host)(network, address, c)
		}
		return d.DialContext(ctx, network, addr)
	}
}
