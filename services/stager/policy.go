package stager

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// HTTPPolicy says which hosts network transfers (http, https, sftp and scp URLs a job
// names) may reach. Every address is checked where it is dialled, after resolution, on
// every connection (each redirect's too), so a name that resolves (or re-resolves, as in
// DNS rebinding) to a refused address is refused whatever it is called.
//
// By default loopback, unspecified, private, link-local, CGNAT, IPv4-mapped, multicast
// and reserved networks and the cloud metadata names are refused (DefaultDeny), and every
// other address is open. Allow opens entries of that list a site needs (its storage on
// 10.1.2.0/24); AllowOnly closes everything not allowed. Deny closes more and wins over
// Allow. The gateway's own listeners are never reachable, whatever the lists say.
type HTTPPolicy struct {
	// Allow lists host names (exact, or ".example.org" for a domain and its subdomains),
	// IPs and CIDRs that are reachable even though the default deny list covers them.
	Allow []string `yaml:"allow,omitempty"`
	// AllowOnly makes Allow the only hosts reachable.
	AllowOnly bool `yaml:"allow_only,omitempty"`
	// Deny adds hosts and networks to the default deny list; it wins over Allow.
	Deny []string `yaml:"deny,omitempty"`
	// CAFile holds PEM certificates trusted for https besides the system's (a site's
	// own storage CA).
	CAFile string `yaml:"ca_file,omitempty"`
	// Own are the gateway's listening addresses (host:port; an unspecified host means
	// every local address). Staging never reaches them. cmd/gridwire fills it in.
	Own []string `yaml:"-"`
}

// defaultDenyNets are the networks no job reaches unless the operator allows them.
var defaultDenyNets = []string{
	"0.0.0.0/8",       // unspecified, "this network"
	"10.0.0.0/8",      // private
	"100.64.0.0/10",   // CGNAT (Alibaba's metadata 100.100.100.200 is here)
	"127.0.0.0/8",     // loopback
	"169.254.0.0/16",  // link-local: AWS, GCP, Azure, OpenStack metadata
	"172.16.0.0/12",   // private
	"192.0.0.0/24",    // IETF protocol assignments
	"192.0.2.0/24",    // documentation
	"192.168.0.0/16",  // private
	"198.18.0.0/15",   // benchmarking
	"198.51.100.0/24", // documentation
	"203.0.113.0/24",  // documentation
	"224.0.0.0/4",     // multicast
	"240.0.0.0/4",     // reserved, broadcast
	"::/96",           // unspecified, loopback, IPv4-compatible
	"::ffff:0:0/96",   // IPv4-mapped (checked before unmapping as well as after)
	"64:ff9b::/96",    // NAT64: an IPv4 address in IPv6 clothing
	"64:ff9b:1::/48",  // local NAT64
	"100::/64",        // discard
	"2001::/32",       // Teredo
	"2001:db8::/32",   // documentation
	"2002::/16",       // 6to4
	"fc00::/7",        // unique local (AWS metadata fd00:ec2::254 is here)
	"fe80::/10",       // link-local
	"fec0::/10",       // site-local (deprecated)
	"ff00::/8",        // multicast
}

// defaultDenyNames are the metadata services' names (their addresses are denied too).
var defaultDenyNames = []string{"metadata.google.internal", "metadata.goog", "metadata",
	"instance-data", "instance-data.ec2.internal", "localhost", ".localhost"}

// DefaultDeny returns the default deny list: networks and names.
func DefaultDeny() []string {
	return append(append([]string(nil), defaultDenyNets...), defaultDenyNames...)
}

// ErrPolicy refuses a host the network policy does not let transfers reach.
var ErrPolicy = errors.New("stager: host refused by the transfer policy (stager.http)")

// MaxHostLength bounds a host name checked or resolved (DNS allows 253).
const MaxHostLength = 255

// LookupTimeout bounds one name resolution of a transfer.
const LookupTimeout = 5 * time.Second

// hostPolicy is an HTTPPolicy parsed once.
type hostPolicy struct {
	allowNames, denyNames, defaultNames []string
	allowNets, denyNets, defaultNets    []netip.Prefix
	allowOnly                           bool
	own                                 []netip.AddrPort // the gateway's listeners on one address
	ownAny                              []uint16         // ports the gateway listens on at every address
	local                               []netip.Addr     // this host's addresses, when ownAny is set
}

func (p HTTPPolicy) compile() (hostPolicy, error) {
	var hp hostPolicy
	for _, s := range defaultDenyNets {
		hp.defaultNets = append(hp.defaultNets, netip.MustParsePrefix(s))
	}
	hp.defaultNames = defaultDenyNames
	var errs []error
	for i, s := range p.Allow {
		if err := addEntry(s, &hp.allowNames, &hp.allowNets); err != nil {
			errs = append(errs, fmt.Errorf("stager.http.allow[%d]: %w", i, err))
		}
	}
	for i, s := range p.Deny {
		if err := addEntry(s, &hp.denyNames, &hp.denyNets); err != nil {
			errs = append(errs, fmt.Errorf("stager.http.deny[%d]: %w", i, err))
		}
	}
	hp.allowOnly = p.AllowOnly
	if err := hp.addOwn(p.Own); err != nil {
		errs = append(errs, err)
	}
	return hp, errors.Join(errs...)
}

func addEntry(s string, names *[]string, nets *[]netip.Prefix) error {
	s = strings.ToLower(strings.TrimSpace(s))
	if s == "" {
		return errors.New("empty entry")
	}
	if pfx, err := netip.ParsePrefix(s); err == nil {
		*nets = append(*nets, pfx.Masked())
		return nil
	}
	if a, err := netip.ParseAddr(s); err == nil {
		*nets = append(*nets, netip.PrefixFrom(a, a.BitLen()))
		return nil
	}
	if strings.ContainsAny(s, "/:") || len(s) > MaxHostLength {
		return fmt.Errorf("%q is neither a host name, an IP nor a CIDR", s)
	}
	*names = append(*names, strings.TrimSuffix(s, "."))
	return nil
}

// addOwn records the gateway's listen addresses. One on an unspecified address (or a
// name) answers on every local address: its port is refused on all of them.
func (hp *hostPolicy) addOwn(listen []string) error {
	for _, l := range listen {
		host, port, err := net.SplitHostPort(l)
		if err != nil {
			return fmt.Errorf("gateway listener %q: %w", l, err)
		}
		pn, err := strconv.ParseUint(port, 10, 16)
		if err != nil {
			return fmt.Errorf("gateway listener %q: bad port", l)
		}
		if a, err := netip.ParseAddr(host); err == nil && !a.IsUnspecified() {
			hp.own = append(hp.own, netip.AddrPortFrom(a.Unmap(), uint16(pn)))
			continue
		}
		hp.ownAny = append(hp.ownAny, uint16(pn))
		if hp.local == nil {
			hp.local = localAddrs()
		}
	}
	return nil
}

// isLocal reports whether a connection to a lands on this host.
func (hp hostPolicy) isLocal(a netip.Addr) bool {
	return a.IsLoopback() || a.IsUnspecified() || slices.Contains(hp.local, a)
}

// localAddrs are this host's interface addresses.
func localAddrs() []netip.Addr {
	var out []netip.Addr
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if p, err := netip.ParsePrefix(a.String()); err == nil {
			out = append(out, p.Addr().Unmap())
		}
	}
	return out
}

// checkName applies the name rules to a URL's host before anything is resolved: a
// literal address is checked as an address, a name against the name lists.
func (hp hostPolicy) checkName(host string) error {
	if len(host) > MaxHostLength {
		return fmt.Errorf("%w: host name longer than %d bytes", ErrPolicy, MaxHostLength)
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if a, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		return hp.checkAddr(host, a)
	}
	switch {
	case host == "":
		return fmt.Errorf("%w: empty host", ErrPolicy)
	case matchName(hp.denyNames, host):
		return fmt.Errorf("%w: %s is in stager.http.deny", ErrPolicy, host)
	case matchName(hp.allowNames, host):
		return nil
	case matchName(hp.defaultNames, host):
		return fmt.Errorf("%w: %s is a metadata or loopback name, denied by default (open it with stager.http.allow)", ErrPolicy, host)
	case hp.allowOnly && len(hp.allowNets) == 0:
		return fmt.Errorf("%w: %s is not in stager.http.allow (allow_only)", ErrPolicy, host)
	}
	return nil
}

// checkAddr applies the network rules to an address a host resolved to (or was).
func (hp hostPolicy) checkAddr(host string, a netip.Addr) error {
	a = a.WithZone("")
	forms := []netip.Addr{a}
	if a.Is4In6() {
		forms = append(forms, a.Unmap())
	}
	for _, f := range forms {
		if n, ok := inNets(hp.denyNets, f); ok {
			return fmt.Errorf("%w: %s (%s) is in denied network %s (stager.http.deny)", ErrPolicy, host, a, n)
		}
	}
	allowed := matchName(hp.allowNames, host)
	for _, f := range forms {
		if _, ok := inNets(hp.allowNets, f); ok {
			allowed = true
		}
	}
	if allowed {
		return nil
	}
	for _, f := range forms {
		if n, ok := inNets(hp.defaultNets, f); ok {
			return fmt.Errorf("%w: %s (%s) is in %s, denied by default (open it with stager.http.allow)", ErrPolicy, host, a, n)
		}
	}
	if hp.allowOnly {
		return fmt.Errorf("%w: %s (%s) is not in stager.http.allow (allow_only)", ErrPolicy, host, a)
	}
	return nil
}

// checkDial checks the address a connection is about to be made to: the network rules,
// and never one of the gateway's own listeners.
func (hp hostPolicy) checkDial(host string, ap netip.AddrPort) error {
	a := ap.Addr().WithZone("").Unmap()
	own := slices.Contains(hp.ownAny, ap.Port()) && hp.isLocal(a)
	for _, o := range hp.own {
		own = own || o.Port() == ap.Port() && (o.Addr() == a || o.Addr().IsLoopback() && a.IsUnspecified())
	}
	if own {
		return fmt.Errorf("%w: %s (%s) is the gateway's own listener", ErrPolicy, host, ap)
	}
	return hp.checkAddr(host, ap.Addr())
}

func inNets(nets []netip.Prefix, a netip.Addr) (netip.Prefix, bool) {
	for _, n := range nets {
		if n.Contains(a) {
			return n, true
		}
	}
	return netip.Prefix{}, false
}

func matchName(list []string, host string) bool {
	for _, n := range list {
		if host == n || strings.HasPrefix(n, ".") && (strings.HasSuffix(host, n) || host == n[1:]) {
			return true
		}
	}
	return false
}

// Resolver resolves host names for transfers; *net.Resolver is one, tests give another.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// dialer returns a DialContext that resolves the host itself, skips the addresses the
// policy refuses, and dials the first it allows, checking again in the dialer's control
// hook on the very address the socket connects to.
func (hp hostPolicy) dialer(base *net.Dialer, res Resolver) func(ctx context.Context, network, addr string) (net.Conn, error) {
	if res == nil {
		res = net.DefaultResolver
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		if err := hp.checkName(host); err != nil {
			return nil, err
		}
		addrs, err := hp.lookup(ctx, res, host)
		if err != nil {
			return nil, err
		}
		d := *base
		d.ControlContext = func(_ context.Context, _, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return fmt.Errorf("%w: cannot parse dialled address %q", ErrPolicy, address)
			}
			return hp.checkDial(host, ap)
		}
		var refused []error
		for _, a := range addrs {
			pn, _ := strconv.ParseUint(port, 10, 16)
			if err := hp.checkDial(host, netip.AddrPortFrom(a, uint16(pn))); err != nil {
				refused = append(refused, err)
				continue
			}
			conn, err := d.DialContext(ctx, network, net.JoinHostPort(a.String(), port))
			if err == nil || errors.Is(err, ErrPolicy) {
				return conn, err
			}
			refused = append(refused, err)
		}
		if len(refused) == 0 {
			return nil, fmt.Errorf("stager: %s resolves to no address", host)
		}
		return nil, errors.Join(refused...)
	}
}

// lookup resolves host (a literal address is itself), within LookupTimeout.
func (hp hostPolicy) lookup(ctx context.Context, res Resolver, host string) ([]netip.Addr, error) {
	if a, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		return []netip.Addr{a}, nil
	}
	ctx, cancel := context.WithTimeout(ctx, LookupTimeout)
	defer cancel()
	addrs, err := res.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil, fmt.Errorf("stager: resolving %s: %w", host, err)
	}
	return addrs, nil
}
